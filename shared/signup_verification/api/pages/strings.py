"""Every word the confirmation pages show, per locale (the locales the message templates have).

Values are trusted markup-free text with `{name}` placeholders; pages/__init__.py escapes the
values it fills in. tests/unit/test_page_strings.py checks every key exists in every locale.
"""

from __future__ import annotations

DEFAULT = "en"

STRINGS: dict[str, dict[str, str]] = {
    "en": {
        "the_site": "the site",
        "confirm_title": "Confirm your email address",
        "confirm_lead": "Press the button to confirm {hint}.",
        "confirm_lead_product": "Press the button to confirm {hint} for {product}.",
        "your_address": "your email address",
        "confirm_button": "Confirm email address",
        "works_once": "This link works once.",
        "expires_one": "This link works once and expires in about 1 minute.",
        "expires_other": "This link works once and expires in about {minutes} minutes.",
        "not_you": "If you did not sign up, close this page: nothing happens without the confirmation.",
        "verified_title": "Email address confirmed",
        "verified_body": "Thank you. {hint} is confirmed.",
        "verified_body_plain": "Thank you. Your address is confirmed.",
        "close_and_return": "You can close this page and return to {product}.",
        "already_title": "Already confirmed",
        "already_body": "{hint} was already confirmed with this link. There is nothing more to do.",
        "already_body_plain": "This address was already confirmed with this link. There is nothing more to do.",
        "expired_title": "This link has expired",
        "expired_body": "For your security, confirmation links work only for a short time.",
        "new_email_steps": "To get a new link: open {product} in this browser, go to the sign-up or sign-in "
        "page, and choose to send the confirmation email again. Then use the link in the newest email.",
        "superseded_title": "A newer link was sent",
        "superseded_body": "This link was replaced by a newer one. Open the most recent confirmation email and use its link.",
        "superseded_note": "Only the latest link works, so an old email cannot confirm an address by mistake.",
        "locked_title": "This confirmation is locked",
        "locked_body": "Too many wrong codes were entered, so this confirmation no longer works.",
        "invalid_title": "This link is not valid",
        "invalid_body": "The link may be incomplete: some email programs break long links across lines. "
        "Try copying the whole link from the email into your browser.",
        "unavailable_title": "Please try again in a moment",
        "unavailable_body": "We could not check your link just now. Nothing was changed.",
        "unavailable_retry_post": "Wait a few seconds, then press the button to confirm again.",
        "unavailable_retry_get": "Wait a few seconds, then press the button to try again.",
        "try_again_confirm": "Try confirming again",
        "try_again": "Try again",
        "continue_to": "Continue to {product}",
        "back_to": "Back to {product}",
    },
    "ja": {
        "the_site": "サイト",
        "confirm_title": "メールアドレスの確認",
        "confirm_lead": "ボタンを押して {hint} を確認してください。",
        "confirm_lead_product": "ボタンを押して {product} の {hint} を確認してください。",
        "your_address": "メールアドレス",
        "confirm_button": "メールアドレスを確認する",
        "works_once": "このリンクは一度だけ使えます。",
        "expires_one": "このリンクは一度だけ使え、約1分で期限が切れます。",
        "expires_other": "このリンクは一度だけ使え、約{minutes}分で期限が切れます。",
        "not_you": "登録した覚えがない場合は、このページを閉じてください。確認しなければ何も起こりません。",
        "verified_title": "メールアドレスを確認しました",
        "verified_body": "ありがとうございます。{hint} の確認が完了しました。",
        "verified_body_plain": "ありがとうございます。メールアドレスの確認が完了しました。",
        "close_and_return": "このページを閉じて {product} に戻ってください。",
        "already_title": "確認済みです",
        "already_body": "{hint} はこのリンクで既に確認されています。これ以上の操作は不要です。",
        "already_body_plain": "このアドレスはこのリンクで既に確認されています。これ以上の操作は不要です。",
        "expired_title": "このリンクは期限切れです",
        "expired_body": "安全のため、確認リンクは短い時間しか使えません。",
        "new_email_steps": "新しいリンクを受け取るには、このブラウザで {product} を開き、登録またはログインのページから"
        "確認メールを再送してください。そのあと最新のメールのリンクを使ってください。",
        "superseded_title": "新しいリンクが送信されました",
        "superseded_body": "このリンクは新しいリンクに置き換えられました。最新の確認メールを開き、そのリンクを使ってください。",
        "superseded_note": "最新のリンクだけが有効なので、古いメールで誤って確認されることはありません。",
        "locked_title": "この確認はロックされました",
        "locked_body": "間違ったコードが何度も入力されたため、この確認は使えなくなりました。",
        "invalid_title": "このリンクは無効です",
        "invalid_body": "リンクが途中で切れている可能性があります。メールに記載されたリンク全体をコピーしてブラウザに貼り付けてください。",
        "unavailable_title": "しばらくしてからもう一度お試しください",
        "unavailable_body": "現在リンクを確認できませんでした。何も変更されていません。",
        "unavailable_retry_post": "数秒待ってから、ボタンを押してもう一度確認してください。",
        "unavailable_retry_get": "数秒待ってから、ボタンを押してもう一度お試しください。",
        "try_again_confirm": "もう一度確認する",
        "try_again": "もう一度試す",
        "continue_to": "{product} に進む",
        "back_to": "{product} に戻る",
    },
}
