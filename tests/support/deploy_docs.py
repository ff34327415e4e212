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


STANDARD = "standard"  # the default tier (var.tier): the tables describe it


def scaling(infra: Infra, tier: str = STANDARD) -> dict[str, dict]:
    """Each function's scaling in a tier: function_defaults, then the tier's presets (infra/tiers.tf)."""
    presets = infra.locals["tiers"][tier]["functions"]
    return {key: {**f, **presets.get(key, {})} for key, f in infra.locals["function_defaults"].items()}


def functions_table(infra: Infra) -> str:
    env = infra.locals["secret_env"]
    defaults = scaling(infra)
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
        f"{len(infra.function_specs)} functions, one Cloud Run service each, all from one image (the standard "
        "tier's scaling; the tiers below change it):\n\n"
        + "\n".join(rows)
        + f"\n\n{len(infra.locals['scheduler_jobs'])} Cloud Scheduler jobs, every minute: {jobs}.\n"
        "A secret is read only when its transport is on (`email_transport`, `sms_transport`, `webhook_url`).\n"
    )


def fanout_default(infra: Infra, tier: str = STANDARD) -> int:
    """The tier's dispatch_max_parallel: the fan-out's invocations (infra/fanout.tf)."""
    return int(infra.locals["tiers"][tier]["dispatch_max_parallel"])


def connections(infra: Infra, tier: str = STANDARD) -> tuple[str, int]:
    """The budget's terms and its peak, as infra/locals.tf sums them (connection_budget)."""
    functions = scaling(infra, tier)
    terms = " + ".join(f"{k} {f['max_instances']}×{f['concurrency']}" for k, f in functions.items())
    dispatch = functions["dispatch"]["concurrency"]
    peak = (
        sum(f["max_instances"] * f["concurrency"] for f in functions.values()) + fanout_default(infra, tier) * dispatch
    )
    if fanout_default(infra, tier):
        terms += f" + dispatch fan-out {fanout_default(infra, tier)}×{dispatch}"
    if infra.locals["tiers"][tier]["start"] == "nudge":
        nudged = int(infra.locals["nudge_parallel"])
        terms += f" + dispatch nudged {nudged}×{dispatch}"
        peak += nudged * dispatch
    return terms, peak


def budget(infra: Infra) -> str:
    terms, peak = connections(infra)
    db = infra.locals["tiers"][STANDARD]["db"]
    size = re.search(r"standard (\S+) = (.+?);", infra.variables["db_tier"]["description"]).group(2).strip()
    return (
        f"Defaults (the standard tier): {terms} = **{peak}** connections at most (`peak_database_connections`), "
        f"+ {db['reserved_connections']} reserved (`db_reserved_connections`) = {peak + db['reserved_connections']} "
        f"≤ `max_connections` {db['max_connections']} (`db_max_connections`), on the standard tier's `{db['tier']}` "
        f"({size}).\n"
    )


def tiers_table(infra: Infra) -> str:
    """What each tier sets (infra/tiers.tf): the database, the scaling that differs, how dispatch starts."""
    rows = [
        "| tier | Cloud SQL | max_connections (reserved) | functions: max instances × concurrency (min) | connections at most "
        "| dispatch starts | fan-out | SMS an hour (per country) | pages |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for tier, preset in infra.locals["tiers"].items():
        db = preset["db"]
        scale = ", ".join(
            f"{k} {f['max_instances']}×{f['concurrency']}" + (f" ({f['min_instances']})" if f["min_instances"] else "")
            for k, f in scaling(infra, tier).items()
        )
        _, peak = connections(infra, tier)
        start = {"nudge": "by create's nudge (1 scheduler job)", "idle_wait": "waiting all minute (2 jobs)"}[
            preset["start"]
        ]
        country = preset["sms_country_per_hour"] or "none"
        pages = {"digest": "the digest page + absence", "per_page": "one policy per page"}[preset["alerting"]]
        rows.append(
            f"| `{tier}` | `{db['tier']}` {db['availability_type'].lower()} | {db['max_connections']} "
            f"({db['reserved_connections']}) | {scale} | {peak} | {start} | {preset['dispatch_max_parallel']} "
            f"| {preset['sms_max_per_hour']:,} ({country}) | {pages} |"
        )
    return "\n".join(rows) + "\n"


# docs/capacity.md, "Calls and WhatsApp in the budgets": the design's calls are this share of its phone
# verifications, each bills at most two started minutes (VOICE_TIME_LIMIT_SECONDS 90) at Twilio's US rate.
CALL_SHARE, CALL_MINUTES, US_MINUTE = 0.02, 2, 0.013


def calls_table(infra: Infra) -> str:
    """Each tier's call budget against 2 % of its SMS budget (the design's phone hour x 1.3), what an hour
    of pumping costs at it, and the calls per second it needs of Twilio (infra/tiers.tf)."""
    rows = [
        "| tier | `sms_max_per_hour` | 2 % of it | `voice_max_per_hour` | an hour of pumping (US, 2 minutes a call) "
        "| calls/s at the budget | CPS it needs |",
        "|---|---|---|---|---|---|---|",
    ]
    for tier, preset in infra.locals["tiers"].items():
        sms, calls = preset["sms_max_per_hour"], preset["voice_max_per_hour"]
        cost, rate = calls * CALL_MINUTES * US_MINUTE, calls / 3600
        cps = max(1, -(-calls // 3600))
        rows.append(
            f"| `{tier}` | {sms:,} | {sms * CALL_SHARE:,.0f} | **{calls:,}** | ~${cost:,.{2 if cost < 10 else 0}f} "
            f"| {rate:.2g} "
            f"| {cps}{' (the default)' if cps == 1 else ': raise `voice.calls_per_second` with the account'} |"
        )
    return "\n".join(rows) + "\n"


RENDERERS = {"functions": functions_table, "connection-budget": budget, "tiers": tiers_table, "calls": calls_table}


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
