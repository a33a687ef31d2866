"""``crystalmesh skill ...``: a skill's life: record runs, version, publish, sell, buy, install."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from node.cli.context import CliContext, CliError, common_options, parse_usdc, usdc
from protocol.skill_bundle import MAX_BUNDLE_BYTES, MAX_RESOURCE_BYTES, MAX_RESOURCES, SkillBundle

if TYPE_CHECKING:
    from node.market import ScanReport


@click.group()
def skill() -> None:
    """Record skill executions, version skills, publish and buy them."""


# --- a skill in this node's memory (these work without a running node too) -----------------------
@skill.command("record-execution")
@click.argument("crystal_id")
@click.option("--success/--failure", required=True, help="Outcome of the run.")
@click.option("--reward", type=click.FloatRange(0.0, 1.0), default=None,
              help="Reward score 0..1 (default 1 on success, 0 on failure).")
@click.option("--note", default=None, help="What happened (kept in the skill's audit trail, <= 1024 chars).")
@common_options
def record_execution(ctx: CliContext, crystal_id: str, success: bool, reward: float | None,
                     note: str | None) -> None:
    """Record one execution outcome of a skill (feeds quality gates, price and its confidence)."""
    data = ctx.client().record_execution(crystal_id, success, reward, note)
    ctx.emit(data, lambda c: click.echo(
        f"{c['id'][:8]}: {c['successes']}/{c['executions']} successful, reward sum {c['rewardSum']:.2f}, "
        f"confidence {c['confidenceBefore']:.3f} -> {c['confidence']:.3f}"))


@skill.command("new-version")
@click.argument("crystal_id")
@click.argument("text")
@common_options
def new_version(ctx: CliContext, crystal_id: str, text: str) -> None:
    """Create the next version of a skill; the old one is deprecated."""
    data = ctx.client().new_skill_version(crystal_id, text)
    ctx.emit(data, lambda c: click.echo(f"{c['id']}  v{c['skillVersion']} of {c['stableSkillId']}"))


@skill.command("crystallize")
@click.argument("crystal_id")
@click.option("--text", default=None, help="The skill's text (default: 'Skill: ' + the pattern's).")
@click.option("--category", default=None, help="Skill category.")
@click.option("--tag", "tags", multiple=True, help="Skill tag (repeatable).")
@common_options
def crystallize(ctx: CliContext, crystal_id: str, text: str | None, category: str | None,
                tags: tuple[str, ...]) -> None:
    """Turn an emerging skill (an id from MEMORY.md's Emerging Skills) into a skill crystal."""
    result = ctx.client().crystallize_skill(crystal_id, text, category, tags)
    ctx.emit(result, lambda c: click.echo(
        f"{c['id']}  skill  executions {c['executions']}  successes {c['successes']}  "
        f"(record executions, then `crystalmesh skill publish {c['id'][:8]}`)"))


def read_skill_folder(folder: Path) -> tuple[SkillBundle, str | None]:
    """A local skill folder as a validated market bundle, and a note if its front matter
    was built from ClawHub's ``_meta.json`` (``node.market.market_bundle``)."""
    from node.market import Unscannable, market_bundle

    try:
        return market_bundle(folder)
    except Unscannable as error:
        raise CliError(f"{error} (market bundles carry up to {MAX_RESOURCES} text files of up to "
                       f"{MAX_RESOURCE_BYTES} bytes, {MAX_BUNDLE_BYTES} bytes in all)") from error


@skill.command("add")
@click.argument("folder", type=click.Path(exists=True, path_type=Path))
@click.option("--scope", type=click.Choice(["private", "shared", "public"]), default="public",
              show_default=True, help="Access scope (public or shared to sell it).")
@click.option("--category", default=None, help="Market category.")
@click.option("--tag", "tags", multiple=True, help="Market tag (repeatable).")
@click.option("--namespace", default=None, help="Namespace of the skill memory (default: default).")
@common_options
def add(ctx: CliContext, folder: Path, scope: str, category: str | None, tags: tuple[str, ...],
        namespace: str | None) -> None:
    """Store an Agent Skills folder (FOLDER/SKILL.md + small text files) as a skill crystal.

    \f
    Example: ``crystalmesh skill add ./skills/pg-replica-recovery --category ops --tag postgres``
    """
    bundle, note = read_skill_folder(folder)
    crystal = ctx.client().add_skill(bundle.encode(), scope=scope, category=category, tags=tags,
                                     namespace=namespace)
    crystal = crystal | {"skill_name": bundle.name, "resources": [path for path, _ in bundle.resources],
                         "front_matter_built": note}
    if note and not ctx.as_json:
        click.echo(note, err=True)
    ctx.emit(crystal, lambda c: click.echo(
        f"{c['id']}  skill {c['skill_name']} ({len(c['resources'])} resource file(s)), "
        f"content hash {c['hash'][:16]}…"))


# --- the market (these need the running node) -----------------------------------------------------
@skill.command("publish")
@click.argument("crystal_ids", nargs=-1)
@click.option("--all", "everything", is_flag=True,
              help="Every listable skill of this node that was never listed.")
@click.option("--name", default=None, help="Listing name (default: the skill's first few words).")
@click.option("--summary", default=None,
              help="What buyers read before paying, up to 1024 characters (default: category and "
                   "tags). The skill itself goes only to paying buyers.")
@common_options
def publish(ctx: CliContext, crystal_ids: tuple[str, ...], everything: bool, name: str | None,
            summary: str | None) -> None:
    """Announce skills on the network (quality gates apply; priced automatically).

    One id: that skill (with --name/--summary). Several ids, or --all: a catalogue, carried in
    signed batches (about 80 listings each), with progress, e.g. `crystalmesh skill publish --all`.

    \f
    Example: ``crystalmesh skill publish 3f2a9c1e --name "pg replica recovery"``
    """
    if len(crystal_ids) == 1 and not everything:
        data = ctx.api().publish_skill(crystal_ids[0], name, summary)
        ctx.emit(data, lambda d: click.echo(
            f"listed {d['listing_id']} at {usdc(d['price_micro_usdc'])} (v{d['skill_version']})"))
        return
    if bool(crystal_ids) == everything or name is not None or summary is not None:
        raise CliError("give one crystal id (with --name/--summary), several ids, or --all")

    def progress(published: int, failed: int, remaining: int) -> None:
        if not ctx.as_json:
            click.echo(f"published {published} (failed {failed}, {remaining} to go)", err=True)

    data = ctx.api().publish_catalogue(list(crystal_ids) if crystal_ids else None, progress)

    def human(data: dict[str, Any]) -> None:
        for item in data["failed"]:
            click.echo(f"not listed {item['crystal_id']}: {item['error']}")
        click.echo(f"listed {len(data['published'])} skills")

    ctx.emit(data, human)


@skill.command("unpublish")
@click.argument("listing_id")
@common_options
def unpublish(ctx: CliContext, listing_id: str) -> None:
    """Withdraw a listing of this node: every node drops it (signed listing_withdrawal)."""
    ctx.emit(ctx.api().withdraw_listing(listing_id), lambda d: click.echo(
        f"withdrew {d['listing_id'][:16]} (skill {d['stable_skill_id'][:12]} v{d['skill_version']})"))


@skill.command("reprice")
@click.argument("listing_id")
@click.option("--price", default=None,
              help="Fixed price in USDC (kept on refreshes); without it, a fresh quote.")
@common_options
def reprice(ctx: CliContext, listing_id: str, price: str | None) -> None:
    """Re-announce a listing at a new price; its listing id and execution stats stay."""
    data = ctx.api().reprice_listing(listing_id, parse_usdc(price) if price else None)
    ctx.emit(data, lambda d: click.echo(
        f"re-announced {d['listing_id'][:16]} at {usdc(d['price_micro_usdc'])}"
        f" (bounty matches {d['bounty_matches']})"))


@skill.command("endorse")
@click.argument("listing_id")
@click.option("--revoke", is_flag=True, help="Withdraw this node's endorsement instead (audited).")
@click.option("--reason", default="", help="Why the endorsement is revoked (kept in the audit log).")
@common_options
def endorse(ctx: CliContext, listing_id: str, revoke: bool, reason: str) -> None:
    """Management nodes: vouch for a listing; every node records it as endorsed.
    With --revoke, every node drops this node's endorsement of it again."""
    if revoke:
        ctx.emit(ctx.api().revoke_endorsement(listing_id, reason), lambda d: click.echo(
            f"revoked the endorsement of {d['listing_id'][:16]}"))
        return
    ctx.emit(ctx.api().endorse_listing(listing_id), lambda d: click.echo(
        f"endorsed {d['listing_id'][:16]} as {d['endorsed_by'][:16]}…"))


@skill.command("buy")
@click.argument("listing_id")
@click.option("--max-price", default=None, help="Refuse if the price is above this (USDC, e.g. 0.05).")
@click.option("--again", is_flag=True, help="Buy a listing this node already owns once more.")
@click.option("--exact", is_flag=True,
              help="Pay with one on-chain transfer even if the seller takes vouchers.")
@common_options
def buy(ctx: CliContext, listing_id: str, max_price: str | None, again: bool, exact: bool) -> None:
    """Buy a listed skill: pay in USDC, verify the delivery, ingest it.

    Running it again after an interrupted purchase never pays twice: it resends the
    authorization already signed, or collects a payment that already settled.

    \f
    Example: ``crystalmesh skill buy 9c41d0e2a7b35f18 --max-price 0.05``
    """
    api = ctx.api()
    config = ctx.config()
    if config.market.vouchers and not exact:
        # Said before the node signs anything: a first purchase from a seller deposits.
        click.echo(f"a first purchase from a seller that takes vouchers deposits "
                   f"{usdc(config.market.channel_deposit_micro_usdc)} (at least the price) into a "
                   "refundable channel; later purchases from it spend that deposit "
                   "(`crystalmesh wallet channels`)", err=True)
    data = api.buy(listing_id, parse_usdc(max_price) if max_price else None, again, exact)
    ctx.emit(data, lambda d: click.echo(
        f"bought {d['listing_id'][:16]} for {usdc(d['price_micro_usdc'])} "
        f"({d.get('scheme', 'exact')})\n"
        + (f"  deposit  {usdc(d['deposit_micro_usdc'])} into channel {d['channel_id']}\n"
           if d.get("deposit_micro_usdc") else "")
        + (f"  tx       {d['tx_hash']}\n" if d.get("tx_hash") else
           f"  voucher  channel total {usdc(d.get('channel_total_micro_usdc', 0))}\n")
        + (f"  crystal  {d['crystal_id']}" if d.get("crystal_id") else
           f"  not stored in memory ({d.get('not_ingested_because', 'ingestion gate')}); "
           "the skill text is in the purchase (--json)")))


@skill.command("redeliver")
@click.argument("listing_id")
@common_options
def redeliver(ctx: CliContext, listing_id: str) -> None:
    """Ask the seller again for a skill paid for but not received."""
    ctx.emit(ctx.api().redeliver(listing_id), lambda d: click.echo(
        f"received {d['listing_id'][:16]} as crystal {d['crystal_id']}"))


@skill.command("install")
@click.argument("skill_ref", metavar="LISTING_OR_CRYSTAL")
@click.option("--to", "to_dir", type=click.Path(path_type=Path), required=True,
              help="Skills folder of the agent (the skill goes to DIR/<name>/SKILL.md).")
@click.option("--force", is_flag=True, help="Replace an installed skill of the same name.")
@click.option("--keep-allowed-tools", is_flag=True,
              help="Keep the seller's allowed-tools (tool pre-approval); dropped by default.")
@click.option("--accept-scan-risk", is_flag=True,
              help="Install even if the skill scan quarantines it (read its findings first).")
@common_options
def install(ctx: CliContext, skill_ref: str, to_dir: Path, force: bool, keep_allowed_tools: bool,
            accept_scan_risk: bool) -> None:
    """Install a bought (or own) skill as DIR/<name>/SKILL.md with a provenance line
    (seller, payment tx, content hash); a plain-text skill gets a SKILL.md made for it."""
    from node.agent import install as write_skill
    from node.agent import source_from_node

    client = ctx.api()
    try:
        result = write_skill(source_from_node(client, skill_ref), to_dir.expanduser(), force=force,
                             keep_allowed_tools=keep_allowed_tools, accept_scan_risk=accept_scan_risk)
    finally:
        client.close()
    ctx.emit(result, lambda r: click.echo(
        f"installed {r['name']} at {r['path']}\n  seller   {r['seller']}\n  tx       {r['tx_hash']}\n"
        f"  sha256   {r['content_hash']}"))


# --- skills an agent can trust: scan, release, warn --------------------------------------------
class Quarantined(click.ClickException):
    """The scan's verdict is quarantine: the report was printed; exit code 3 for scripts."""

    exit_code = 3


def _scan_source(ctx: CliContext, ref: str) -> tuple[str | Path, ScanReport]:
    """The skill to scan (a local folder or file, or the text of a skill this node holds)
    and its report; a local one is scanned as published, within the scan limits of
    ``node.market.scan.folder``."""
    from node.market import scan_folder, scan_text

    path = Path(ref).expanduser()
    if path.exists():
        return path, scan_folder(path)
    from node.agent import source_from_node

    client = ctx.api()
    try:
        text = source_from_node(client, ref).text
    finally:
        client.close()
    return text, scan_text(text)


def _judged(ctx: CliContext, source: str | Path, report: ScanReport) -> ScanReport:
    """``report`` with the configured endpoint's opinion (``scan.judge_url``; judge.py)."""
    from node.market import EndpointSettings, judge_with_endpoint

    settings = ctx.config().scan
    endpoint = EndpointSettings(settings.judge_url, settings.judge_model, settings.judge_key_env,
                                settings.judge_key_file, settings.judge_timeout_s)
    return judge_with_endpoint(report, source, endpoint)


@skill.command("scan")
@click.argument("ref", metavar="PATH_OR_LISTING")
@click.option("--judge", is_flag=True, help="Also ask the judge configured in scan.judge_url for a second opinion "
              "(it may raise ok to warn, never lower or quarantine).")
@common_options
def scan(ctx: CliContext, ref: str, judge: bool) -> None:
    """Scan a skill before it reaches an agent: a local folder or SKILL.md, or a skill this
    node bought (listing id) or holds (crystal id). Exit code 3 when it would be quarantined.

    \f
    Example: ``crystalmesh skill scan ./skills/pg-replica-recovery --json``
    """
    source, scanned = _scan_source(ctx, ref)
    report = (_judged(ctx, source, scanned) if judge else scanned).to_dict()

    def human(data: dict[str, Any]) -> None:
        if data.get("refused"):
            click.echo(f"refused, not read ({data['refused']['code']}): {data['refused']['reason']}")
        else:
            click.echo(f"{data['verdict']} (score {data['score']})")
        for finding in data["findings"]:
            where = f"{finding['file']}:" if finding.get("file") else ""
            click.echo(f"  {finding['severity']:6} {finding['rule']}: {finding['excerpt']}"
                       + (f"  [{finding['reason']}]" if finding.get("reason") else ""))
            click.echo(f"         {where}{finding['line']}: {finding.get('evidence') or finding['excerpt']}")
        for entry in data.get("skipped", []):
            click.echo(f"  skipped {entry['file']}: {entry['reason']}")
        opinion = data.get("judge")
        if opinion is not None:
            said = opinion["verdict"] if opinion["status"] == "judged" else "not judged"
            click.echo(f"  judge  {opinion['judge']}: {said}: {opinion['reason']}")

    ctx.emit(report, human)
    if report["verdict"] == "refused":
        raise Quarantined("the skill scan could not read this skill (reason above); it is not a detection")
    if report["verdict"] == "quarantine":
        raise Quarantined("the skill scan quarantines this skill (findings above)")


@skill.command("release")
@click.argument("listing_id")
@common_options
def release(ctx: CliContext, listing_id: str) -> None:
    """Take a quarantined purchase into memory after all (read its findings first)."""
    ctx.emit(ctx.api().release(listing_id), lambda d: click.echo(
        f"released {d['listing_id'][:16]} as crystal {d['crystal_id']} (was: {d['was']})"))


@skill.command("warn")
@click.argument("target", metavar="LISTING_OR_HASH")
@click.option("--reason", required=True, help="Why it is poison (up to 280 characters).")
@common_options
def warn(ctx: CliContext, target: str, reason: str) -> None:
    """Warn the network that a listing (or a skill's sha256 content hash) is poison.

    A management node's warning pulls the listing from every node at once; a trusted peer's
    counts towards a quorum of three (docs/protocol.md, "Skill warnings").

    \f
    Example: ``crystalmesh skill warn 9c41d0e2a7b35f18 --reason "exfiltrates ~/.ssh"``
    """
    ctx.emit(ctx.api().warn_skill(target, reason), lambda d: click.echo(
        f"warned about {', '.join(t[:16] for t in d['targets'])}: dropped {d['dropped_listings']} "
        f"listing(s), quarantined {len(d['quarantined'])} purchase(s)"))
