"""What a provider's answer means, as two separate questions (docs/channels.md has the tables).

Every classification, synchronous (the answer to a submission) or asynchronous (a delivery report),
gives a `Verdict`:

  final      the message will never arrive: the delivery fails, a waiting fallback is brought
             forward, and `delivery.failed` is sent once no channel is left
  fault      whose fault it is:
               recipient             the destination: it goes on the suppression list
               sender_or_account     our configuration, quota, payload or sender: never suppresses
               transient_or_unknown  neither
  scope      what else the same answer would stop (`Scope`), and so what a hold may stop:
               account  every message of the channel would meet it (credentials, suspension, quota,
                        a sender that reaches no destination): counts towards holding the whole
                        channel, and stops the invocation's other sends of the channel at once
               route    the sender towards one route only: an SMS destination country (Twilio's
                        answers name no carrier or number type, so the country is the finest route
                        they give) or an email receiving domain; counts towards holding that route,
                        and only when several destinations and accounts fail and make up a share of
                        the route's recent sends (record_route_outcomes)
               message  this message or this destination only (or a passing condition): holds nothing
             A route or message fault never stops another send nor changes another intent's backoff.
  category   the documented reason vocabulary the site reads (`Category`), plus the provider's code

One table per provider (twilio.py, sendgrid.py, smtp.py), each row citing the provider's
documentation. The SQL never re-derives any of it: the statements that record a failure act on the
verdict's fields (outbox/queries/settle.sql:settle, ingest_delivery_reports); the same scope
names are the values the SQL reads (`channel_holds.scope`).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from enum import StrEnum


class Scope(StrEnum):
    ACCOUNT = "account"  # every message of the channel: may hold the channel
    ROUTE = "route"  # the sender towards one destination country or receiving domain: may hold that route
    MESSAGE = "message"  # this message or destination only: holds nothing


class Fault(StrEnum):
    RECIPIENT = "recipient"
    SENDER_OR_ACCOUNT = "sender_or_account"
    TRANSIENT_OR_UNKNOWN = "transient_or_unknown"


class Category(StrEnum):
    """Why a delivery failed for good (or a destination is suppressed): the read API's `reason.category`."""

    BOUNCED = "bounced"  # the mailbox does not exist (a hard bounce)
    INVALID_DESTINATION = "invalid_destination"  # malformed or non-existent address or number
    BLOCKED = "blocked"  # the receiving server or carrier refused it (policy, reputation)
    UNREACHABLE = "unreachable"  # the handset is off or out of coverage, or the mailbox is disabled for now
    CARRIER_FILTERED = "carrier_filtered"  # the carrier filtered the content
    UNSUBSCRIBED = "unsubscribed"  # the recipient opted out (STOP, unsubscribe)
    SPAM_REPORTED = "spam_reported"  # the recipient reported the message as spam
    NOT_MOBILE = "not_mobile"  # a landline or a number that cannot receive SMS
    MAILBOX_FULL = "mailbox_full"
    REGION_NOT_PERMITTED = "region_not_permitted"  # the account may not send to that country
    SENDER_MISCONFIGURED = "sender_misconfigured"  # our sender, credentials or account
    QUOTA_EXCEEDED = "quota_exceeded"  # our account's quota
    RATE_LIMITED = "rate_limited"  # the provider's queue for our sender overflowed
    MESSAGE_REJECTED = "message_rejected"  # the content or payload was refused
    ATTEMPTS_EXHAUSTED = "attempts_exhausted"  # every allowed attempt failed transiently
    UNCONFIRMED = "unconfirmed"  # it may have been sent; the ambiguity policy gave up on it
    EXPIRED = "expired"  # the link expired before the message could be sent
    SUPPRESSED = "suppressed"  # the destination is on the suppression list: never sent
    UNKNOWN = "unknown"


@dataclass(frozen=True)
class Rule:
    """One row of a provider's table: what one documented code or event means."""

    final: bool
    fault: Fault
    category: Category
    source: str  # where the provider documents it
    meaning: str = ""  # the provider's own words, shortened (docs/channels.md prints them)
    scope: Scope = Scope.MESSAGE  # what else the same answer would stop (what a hold may stop)

    @property
    def holds_channel(self) -> bool:
        return self.scope is Scope.ACCOUNT


@dataclass(frozen=True)
class Verdict:
    """A classified answer or report: the row's meaning plus the code and provider it came from."""

    final: bool
    fault: Fault
    category: Category
    provider: str | None
    code: str | None = None
    scope: Scope = Scope.MESSAGE

    @classmethod
    def of(cls, rule: Rule, provider: str | None, code: str | int | None) -> Verdict:
        return cls(rule.final, rule.fault, rule.category, provider, None if code is None else str(code)[:64],
                   rule.scope)  # fmt: skip

    @property
    def holds_channel(self) -> bool:
        """An account fault: every message of the channel would meet it."""
        return self.scope is Scope.ACCOUNT

    @property
    def suppresses(self) -> bool:
        """Only the recipient's fault puts the destination on the suppression list."""
        return self.fault is Fault.RECIPIENT

    def reason(self) -> dict[str, str | None]:
        """The read API's and the events' `reason` object."""
        return {"category": self.category.value, "code": self.code, "provider": self.provider,
                "fault": self.fault.value}  # fmt: skip


def rule(
    final: bool, fault: Fault, category: Category, source: str, meaning: str = "", *, scope: Scope = Scope.MESSAGE
) -> Rule:
    if scope is Scope.ACCOUNT and fault is not Fault.SENDER_OR_ACCOUNT:
        raise ValueError("only a fault of our sender or account holds a channel")
    if fault is Fault.RECIPIENT and scope is not Scope.MESSAGE:
        raise ValueError("a recipient's fault is one destination's: it holds nothing")
    return Rule(final, fault, category, source, meaning, scope)


def at_most(found: Rule, scope: Scope) -> Rule:
    """The row, its scope narrowed to `scope` (a report or a quoted reply cannot speak for the account)."""
    order = (Scope.MESSAGE, Scope.ROUTE, Scope.ACCOUNT)
    narrower = min(found.scope, scope, key=order.index)
    return found if narrower is found.scope else dataclasses.replace(found, scope=narrower)


def ours(category: Category, provider: str | None = None, *, scope: Scope = Scope.MESSAGE) -> Verdict:
    """A failure for good on our side, found before or beside the provider (a message that cannot be
    rendered or written, a relay that cannot carry it): never the recipient's fault."""
    return Verdict(True, Fault.SENDER_OR_ACCOUNT, category, provider, None, scope)


def configuration(provider: str | None = None) -> Verdict:
    """Our configuration is wrong (credentials, the sender, TLS trust, a missing key or adapter):
    every message of the channel meets it, so it holds the channel and alerts."""
    return ours(Category.SENDER_MISCONFIGURED, provider, scope=Scope.ACCOUNT)


def unexplained(provider: str | None, code: str | int | None = None) -> Verdict:
    """A refusal for good that no table row explains: final, nobody's fault we can name."""
    return Verdict(True, Fault.TRANSIENT_OR_UNKNOWN, Category.UNKNOWN, provider, None if code is None else str(code))
