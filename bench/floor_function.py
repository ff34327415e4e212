"""The cold-start bench's floor: a function that loads only the libraries create_verification's first
answer cannot do without (the design card's pydantic and pg8000, and email_validator for the
address), validates the body with a small model and the address, runs one statement on a fresh
connection, and answers 201. No code of ours: what any create on these dependencies pays."""

import os
from urllib.parse import parse_qs, urlsplit

import email_validator
import functions_framework
import pg8000.native
from pydantic import BaseModel, Field


class Body(BaseModel):
    account_id: str = Field(min_length=1, max_length=128)
    channel: str
    destination: str


def _connect() -> pg8000.native.Connection:
    url = urlsplit(os.environ["DATABASE_URL"])
    query = parse_qs(url.query)
    host = query.get("host", [url.hostname or ""])[0]
    port = int(query.get("port", [url.port or 5432])[0])
    database = url.path.lstrip("/")
    if host.startswith("/"):
        return pg8000.native.Connection(url.username, database=database, unix_sock=f"{host}/.s.PGSQL.{port}")
    return pg8000.native.Connection(url.username, host=host, port=port, database=database)


@functions_framework.http
def floor(request):
    body = Body.model_validate_json(request.get_data())
    email_validator.validate_email(body.destination, check_deliverability=False)
    con = _connect()
    try:
        con.run("SELECT 1")
    finally:
        con.close()
    return {"ok": True}, 201
