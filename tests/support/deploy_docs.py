"""The parts of docs/deploy.md and docs/capacity.md that state facts of infra/: rendered from the parsed
Terraform (support/terraform_model.py), so the docs are never typed a second time. The tests compare
each marked block with its rendering; after changing infra/, rewrite them with:

    .venv/bin/python tests/support/deploy_docs.py --write
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from support.terraform_model import INFRA, Infra, load_infra

DOCS = INFRA.parent / "docs"
BLOCK = re.compile(r"(<!-- generated: (?P<name>[a-z-]+)[^>]*-->\n)(?P<body>.*?)(<!-- end generated -->)", re.DOTALL)


def _who_calls(infra: Infra, key: str) -> str:
    if infra.function_specs[key]["public"]:
        return "anyone: the invoker check is off (`public_access`), no `allUsers` binding"
    invokers = infra.locals["private_invokers"]
    scheduled = {job["function"] for job in infra.locals["scheduler_jobs"].values()}
    if key in scheduled:
        fanout = " and the fan-out's (its Cloud Tasks)" if f'"{key}/fanout"' in invokers else ""
        return "the scheduler's service account" + fanout
    if f'"{key}/signup-site"' in invokers:
        return "the signup site's service account only"
    if f'"{key}/${{m}}"' in invokers:
        return "`operators`"
    raise ValueError(f"no invoker rule found for {key}")


def functions_table(infra: Infra) -> str:
    env = infra.locals["secret_env"]
    defaults = infra.locals["function_defaults"]
    rows = [
        "| function (Cloud Run service) | entry point | ingress | who may call it | secrets it reads | database | max instances × concurrency |",
        "|---|---|---|---|---|---|---|",
    ]
    for key, spec in infra.function_specs.items():
        ingress = spec["ingress"]
        if ingress.startswith("${var."):  # a variable's default, named after it
            name = ingress.removeprefix("${var.").removesuffix("}")
            ingress = infra.variables[name]["default"]
        ingress = ingress.removeprefix("INGRESS_TRAFFIC_").lower().replace("_", " ")
        if spec["ingress"].startswith("${var."):
            ingress += f" (`{name}`)"
        secrets = ", ".join(f"`{env[s]}`" for s in spec["secrets"]) or "none"
        scale = defaults[key]
        instances = str(scale["max_instances"])
        if key == "dispatch" and fanout_default(infra):
            instances = f"({instances} + {fanout_default(infra)} fan-out)"
        rows.append(
            f"| `NAME-{key}` | `{spec['entry_point']}` | {ingress} "
            f"| {_who_calls(infra, key)} | {secrets} | {spec['db_role']} | {instances} × {scale['concurrency']} |"
        )
    jobs = ", ".join(
        f"`NAME-{k.replace('_', '-')}` → {j['function']}" for k, j in infra.locals["scheduler_jobs"].items()
    )
    return (
        f"{len(infra.function_specs)} functions, one Cloud Run service each, all from one image:\n\n"
        + "\n".join(rows)
        + f"\n\n{len(infra.locals['scheduler_jobs'])} Cloud Scheduler jobs, every minute: {jobs}.\n"
        "A secret is read only when its transport is on (`email_transport`, `sms_transport`, `webhook_url`).\n"
    )


def fanout_default(infra: Infra) -> int:
    """dispatch_max_parallel's default: the fan-out's invocations (infra/fanout.tf)."""
    return int(infra.variables["dispatch_max_parallel"]["default"])


def budget(infra: Infra) -> str:
    defaults = infra.locals["function_defaults"]
    terms = " + ".join(f"{k} {f['max_instances']}×{f['concurrency']}" for k, f in defaults.items())
    fanout = fanout_default(infra) * defaults["dispatch"]["concurrency"]
    terms += f" + dispatch fan-out {fanout_default(infra)}×{defaults['dispatch']['concurrency']}"
    peak = sum(f["max_instances"] * f["concurrency"] for f in defaults.values()) + fanout
    reserved = infra.variables["db_reserved_connections"]["default"]
    limit = infra.variables["db_max_connections"]["default"]
    tier = infra.variables["db_tier"]["default"]
    size = re.search(r"= (.+?)(?: \(|\.$)", infra.variables["db_tier"]["description"]).group(1).strip()
    return (
        f"Defaults: {terms} = **{peak}** connections at most (`peak_database_connections`), "
        f"+ {reserved} reserved (`db_reserved_connections`) = {peak + reserved} ≤ `max_connections` {limit} "
        f"(`db_max_connections`), on the default tier `{tier}` ({size}).\n"
    )


RENDERERS = {"functions": functions_table, "connection-budget": budget}


def render_file(text: str, infra: Infra) -> str:
    def replace(match: re.Match[str]) -> str:
        return match.group(1) + RENDERERS[match.group("name")](infra) + match.group(4)

    return BLOCK.sub(replace, text)


def blocks(text: str) -> dict[str, str]:
    return {m.group("name"): m.group("body") for m in BLOCK.finditer(text)}


def main(argv: list[str]) -> int:
    infra = load_infra()
    stale = []
    for path in (DOCS / "deploy.md", DOCS / "capacity.md"):
        text = path.read_text()
        rendered = render_file(text, infra)
        if rendered != text:
            stale.append(path.name)
            if "--write" in argv:
                path.write_text(rendered)
    print(("rewrote: " if "--write" in argv else "stale: ") + (", ".join(stale) or "nothing"))
    return 1 if stale and "--write" not in argv else 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
