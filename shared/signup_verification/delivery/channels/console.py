"""Local transports: nothing leaves the machine.

ConsoleChannel writes each message to a file under the git-ignored local folder (`.local/outbox/`,
an .eml per email, a .sms.txt per SMS, a .whatsapp.txt per WhatsApp message, a .voice.txt per call
with what it says) and logs one line with the masked destination and the file
name: the link or code is in the file, never in the log. DisabledChannel stands in for a console
transport in production, where every send fails as a configuration error (it alerts) rather
than writing tokens to an instance's disk.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path

from ...platform.redaction import mask_destination
from ..code_messages import VoiceContent, WhatsAppContent
from ..messages import Content, EmailContent, SmsContent
from .base import SendResult

_log = logging.getLogger("signup_verification.delivery.channels.console")


class ConsoleChannel:
    transport = "console"

    def __init__(self, channel: str, folder: Path):
        self.channel = channel
        self.folder = Path(folder)

    def send(self, message: Content, deadline: float) -> SendResult:
        name = message.attempt_id.replace(":", "-")
        if isinstance(message, EmailContent):
            data, path = message.mime(), self.folder / f"{name}.eml"
        elif isinstance(message, SmsContent):
            data = (
                f"To: {message.to}\nEncoding: {message.encoding}\nSegments: {message.segments}\n\n{message.body}\n"
            ).encode()
            path = self.folder / f"{name}.sms.txt"
        elif isinstance(message, WhatsAppContent):
            data = f"To: whatsapp:{message.to}\nLanguage: {message.locale}\n\n{message.text}\n".encode()
            path = self.folder / f"{name}.whatsapp.txt"
        elif isinstance(message, VoiceContent):
            data = f"To: {message.to}\nLanguage: {message.language}\n\n{message.speech}\n".encode()
            path = self.folder / f"{name}.voice.txt"
        else:
            return SendResult.configuration(f"the console transport writes no {message.channel}", None)
        try:
            self.folder.mkdir(parents=True, exist_ok=True)
            tmp = path.with_suffix(path.suffix + ".tmp")
            tmp.write_bytes(data)
            os.chmod(tmp, 0o600)  # it holds a live token
            tmp.replace(path)
        except OSError as exc:
            return SendResult.retryable("console_write", f"cannot write the local outbox: {type(exc).__name__}")
        _log.info("%s for %s written to %s", self.channel, mask_destination(self.channel, message.to), path)
        return SendResult.accepted(f"console:{path.name}")

    def close(self) -> None:
        pass


class DisabledChannel:
    transport = "disabled"

    def __init__(self, channel: str, reason: str):
        self.channel = channel
        self.reason = reason

    def send(self, message, deadline: float) -> SendResult:
        return SendResult.configuration(self.reason, None)

    def close(self) -> None:
        pass
