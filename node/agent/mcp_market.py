"""MCP tools of the market: search and buy skills, install one, publish one or a catalogue,
the wallet; the agent's skill loop: record runs, bounties, re-price, unpublish, and report
how a bought skill did. (Crystallizing an emerging skill is working memory's:
``node.agent.mcp_working``.)

Registered by :func:`node.agent.mcp_server.build_server`; each tool is one or two calls of
the node's typed client. Every description says what the call costs (USDC, signed network
messages, or nothing but a local write) and when an agent should make it, because an
agent decides from the description alone.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from pydantic import Field

from node.agent.mcp_common import Call, offer, path_segment
from node.agent.mcp_progress import HEARTBEAT_S, Progress
from node.agent.skill_install import install, source_from_node
from node.api import ApiClient, ApiError, shapes
from node.errors import CrystalmeshError
from protocol.schema import InvalidMessage

MICRO_PER_USDC = 1_000_000

SkillId = Annotated[str, Field(min_length=1, max_length=128,
                               description="A skill memory's id (from memory_search, memory_list or "
                                           "the skill:// resources).")]
ListingId = Annotated[str, Field(min_length=1, max_length=128, description="A listing id.")]
Reward = Annotated[float | None, Field(ge=0.0, le=1.0, description=(
    "How good the result was, 0..1 (default 1 on success, 0 on failure)."))]
Note = Annotated[str | None, Field(max_length=1024, description=(
    "What happened, in a sentence (kept in the skill's audit trail)."))]


def usdc_to_micro(amount_usdc: float, field: str = "max_price_usdc") -> int:
    """Dollars as an agent writes them (0.05) to integer micro-USDC, refusing sub-micro amounts."""
    micro = round(amount_usdc * MICRO_PER_USDC)
    if micro < 0 or abs(micro - amount_usdc * MICRO_PER_USDC) > 1e-6 * MICRO_PER_USDC:
        raise ToolError(f"{field} must be a non-negative amount with at most 6 decimals, got {amount_usdc}")
    return micro


def _with_usdc(data: dict[str, Any], key: str = "price_micro_usdc") -> dict[str, Any]:
    amount = data.get(key)
    usdc_key = key.replace("_micro_usdc", "_usdc")
    return data | ({usdc_key: amount / MICRO_PER_USDC} if isinstance(amount, int) else {})


PURCHASE_STEPS = ("terms: asking the seller", "payment: authorizing USDC", "delivery: waiting for the skill",
                  "verification: checking and scanning the skill", "ingest: storing the skill")
# What a purchase's state on the node (node.market.states.PurchaseState) says is done; a
# finished purchase still has its answer to come, which is the last step.
_STEPS_DONE = {"authorized": 1, "pending": 1, "paid": 2, "paid_undelivered": 2, "delivered_not_ingested": 4,
               "quarantined": 4, "completed": 4}


def purchases_of(client: ApiClient, listing_id: str, limit: int = 50) -> list[shapes.Purchase]:
    """This node's newest purchases of one listing (newest first)."""
    return [row for row in client.purchases(limit) if row["listing_id"] == listing_id]


def purchase_step(state: object) -> tuple[float, str] | None:
    """(steps done, the step under way) for a purchase in ``state``; None before it has a row."""
    done = _STEPS_DONE.get(state) if isinstance(state, str) else None
    if done is None:
        return None
    return float(done), PURCHASE_STEPS[done]


def bought_skill(client: ApiClient, ref: str) -> shapes.CrystalDetail:
    """The crystal of a skill this node bought: ``ref`` is the listing id or the crystal id."""
    try:
        crystal = client.memory_get(ref)
    except ApiError as error:
        if error.status != 404:
            raise
        crystal_id = next((p["crystal_id"] for p in client.purchases(1000)
                           if p["listing_id"] == ref and p["crystal_id"]), None)
        if crystal_id is None:
            raise ToolError(f"{ref} is neither a skill memory nor a listing this node bought "
                            "and stored") from error
        crystal = client.memory_get(crystal_id)
    if not (crystal.get("governance") or {}).get("peerOrigin"):
        raise ToolError(f"{ref} is this agent's own skill, not a bought one: "
                        "use skill_record_execution")
    return crystal


def report_outcome(client: ApiClient, ref: str, success: bool, reward: float | None,
                   note: str | None) -> dict[str, Any]:
    """Record a bought skill's run (the node turns it into trust evidence about the seller)."""
    crystal = bought_skill(client, ref)
    seller = crystal["governance"]["peerOrigin"]
    recorded = client.record_execution(crystal["id"], success, reward, note)
    trust = next((row for row in client.trust_rows() if row.get("peer_key") == seller), None)
    return {"crystal_id": recorded["id"], "seller_key": seller, "success": success,
            "executions": recorded.get("executions"), "successes": recorded.get("successes"),
            "confidence_before": recorded.get("confidenceBefore"), "confidence": recorded.get("confidence"),
            "seller_trust": None if trust is None else {
                key: trust.get(key) for key in ("level", "reputation", "local", "events", "last_reason")}}


class MarketTools:
    """The market's tools, one method each (what an agent sees is each method's signature and docstring)."""

    def __init__(self, call: Call, heartbeat_s: float = HEARTBEAT_S) -> None:
        self.call = call
        self.heartbeat_s = heartbeat_s

    async def market_search(
        self,
        query: Annotated[str, Field(min_length=1, description="The skill you need, in plain words.")],
        k: Annotated[int, Field(ge=1, le=50)] = 10,
        max_price_usdc: Annotated[float | None, Field(ge=0, description="Only skills at or below this price.")] = None,
    ) -> dict[str, Any]:
        """Search skills other nodes sell, by meaning. Prices are in USDC (and micro-USDC)."""
        max_price = None if max_price_usdc is None else usdc_to_micro(max_price_usdc)
        listings = await self.call(lambda client: client.search_listings(query, k, max_price_micro_usdc=max_price))
        return {"listings": [_listing(listing) for listing in listings]}

    async def skill_buy(
        self,
        ctx: Context[Any, Any],
        listing_id: Annotated[str, Field(min_length=1, description="listing_id from market_search.")],
        max_price_usdc: Annotated[float, Field(ge=0, description="Refuse to pay more than this (USDC).")],
    ) -> dict[str, Any]:
        """Buy a skill with USDC and store it in memory. COSTS USDC: pays the listing's price, at
        most max_price_usdc and never beyond the node's spend caps. Returns the price actually
        paid, "scheme" (how it was paid: "batch-settlement" = a voucher from a deposit held for
        that seller, "exact" = one on-chain transfer) and the stored skill's id. The FIRST
        purchase from a seller that takes vouchers also deposits [market]
        channel_deposit_micro_usdc (default 1 USDC, at least the price) into a refundable channel
        ("deposit_usdc" in the result; see wallet_channels). After running it, call
        skill_report_outcome.
        Every bought skill is scanned first: "quarantined": true means it was NOT stored (its
        "scan" findings say why; only the operator can release it) and the seller was charged.
        Reports progress (terms, payment, delivery, verification, ingest) to a client that asks."""
        max_price = usdc_to_micro(max_price_usdc)
        progress = Progress(ctx, total=len(PURCHASE_STEPS), heartbeat_s=self.heartbeat_s)
        await progress.step(0, PURCHASE_STEPS[0])
        earlier = {row.get("request_id") for row in await self.call(lambda client: purchases_of(client, listing_id))}

        async def observe() -> tuple[float, str] | None:
            rows = await self.call(lambda client: purchases_of(client, listing_id))
            state = next((row.get("state") for row in rows if row.get("request_id") not in earlier), None)
            return purchase_step(state)

        result = await progress.during(lambda: self.call(lambda client: client.buy(listing_id, max_price)),
                                       PURCHASE_STEPS[0], observe)
        await progress.step(len(PURCHASE_STEPS), "quarantined: paid, not stored" if result.get("quarantined")
                            else "stored in memory")
        paid = result.get("price_micro_usdc")
        deposit = result.get("deposit_micro_usdc")
        return (result | ({"price_usdc": paid / MICRO_PER_USDC} if isinstance(paid, int) else {})
                | ({"deposit_usdc": deposit / MICRO_PER_USDC} if isinstance(deposit, int) else {})
                | {"scheme": result.get("scheme", "exact")})

    async def skill_publish(
        self,
        crystal_id: Annotated[str, Field(min_length=1, description="Id of a skill memory with a track record.")],
    ) -> dict[str, Any]:
        """List one of the agent's proven skills on the market (needs >= 3 recorded executions
        and >= 60 % success, see skill_record_execution). Costs no USDC: one signed gossip
        message. The price comes from the node's pricing engine (change it: listing_reprice)."""
        segment = path_segment(crystal_id)
        return await self.call(lambda client: client.publish_skill(segment))

    async def skill_publish_catalogue(
        self,
        ctx: Context[Any, Any],
        crystal_ids: Annotated[list[str] | None, Field(
            description="Ids of skill memories to list; omit to list every listable skill "
                        "this node never listed.")] = None,
    ) -> dict[str, Any]:
        """List many of the agent's proven skills at once (a catalogue), carried in signed
        batches so the network's rate limit is no obstacle. Returns the listings made and the
        skills that could not be listed, with the reason. Reports progress after each batch
        to a client that asks for it."""
        ids = [path_segment(crystal_id) for crystal_id in crystal_ids] if crystal_ids is not None else None
        progress = Progress(ctx, total=len(ids) if ids is not None else None, heartbeat_s=self.heartbeat_s)
        await progress.step(0, "publishing the catalogue")
        report = progress.from_worker()

        def batch_done(published: int, failed: int, remaining: int) -> None:
            report(published + failed, published + failed + remaining)

        return await progress.during(lambda: self.call(lambda client: client.publish_catalogue(ids, batch_done)),
                                     "publishing the catalogue")

    async def skill_install(
        self,
        skill: Annotated[str, Field(min_length=1, max_length=128,
                                    description="listing_id of a bought skill, or a skill memory's id.")],
        to_dir: Annotated[str, Field(min_length=1, description="Absolute path of the agent's skills folder.")],
        force: Annotated[bool, Field(description="Replace an installed skill of the same name.")] = False,
    ) -> dict[str, Any]:
        """Install a skill as an Agent Skill: writes <to_dir>/<name>/SKILL.md (with a provenance
        line naming seller, payment tx and content hash) and its resource files. A skill the scan
        quarantines is refused: only the node's operator can release or accept it."""
        if not Path(to_dir).is_absolute():
            raise ToolError("to_dir must be an absolute path")

        try:
            installed: dict[str, Any] = await self.call(
                lambda client: install(source_from_node(client, skill), Path(to_dir), force=force))
        except (CrystalmeshError, InvalidMessage, OSError) as exc:  # node errors: already tool errors
            raise ToolError(str(exc)) from exc
        return installed

    async def wallet_balance(self) -> dict[str, Any]:
        """The node's wallet address and USDC balance, and today's spending against its cap."""
        return await self.call(lambda client: client.wallet())

    async def wallet_channels(self) -> dict[str, Any]:
        """Payment channels: per seller this node buys from, the deposit, what vouchers spent
        and what is left (refundable), and when a started withdrawal can be finalized; per
        buyer paying this node, what it was charged and what is not yet claimed, and whether
        the buyer asked to withdraw; "http_paid_by": the same for buyers paying over the
        x402 HTTP endpoint (charged, claimed)."""
        return await self.call(lambda client: client.channels())

    async def skill_record_execution(
        self,
        crystal_id: SkillId,
        success: Annotated[bool, Field(description="Did this run of the skill do its job?")],
        reward: Reward = None,
        note: Note = None,
    ) -> dict[str, Any]:
        """Record how one run of one of your own skills went. Costs nothing: a local write,
        no USDC, no network message. Call it after every run of a skill you own: a skill
        needs >= 3 recorded runs and >= 60 % success before skill_publish can list it, and
        its track record sets its price. For a skill you bought, call skill_report_outcome."""
        segment = path_segment(crystal_id)
        crystal: dict[str, Any] = await self.call(
            lambda client: client.record_execution(segment, success, reward, note))
        return {"id": crystal["id"], "executions": crystal.get("executions"),
                "successes": crystal.get("successes"), "reward_sum": crystal.get("rewardSum"),
                "confidence_before": crystal.get("confidenceBefore"),
                "confidence": crystal.get("confidence"), "note": note}

    async def bounty_post(
        self,
        text: Annotated[str, Field(min_length=1, max_length=1024, description=(
            'What you need, e.g. "need: a skill that rotates TLS certificates".'))],
        reward_usdc: Annotated[float, Field(ge=0, description="The most you would pay for it (USDC).")],
        ttl_seconds: Annotated[int | None, Field(ge=60, le=7 * 86_400,
                                                 description="How long it stays open.")] = None,
    ) -> dict[str, Any]:
        """Ask the network for a skill you lack, with a reward. Costs no USDC now: one signed
        message is gossiped to every node (at most a few per minute); sellers of matching
        skills see the demand and their price rises. Pay only by bounty_fulfil. Call it when
        market_search finds nothing good enough."""
        reward = usdc_to_micro(reward_usdc, "reward_usdc")
        result: dict[str, Any] = await self.call(lambda client: client.post_bounty(text, reward, ttl_seconds))
        return _with_usdc(result, "reward_micro_usdc")

    async def bounty_list(
        self,
        only_open: Annotated[bool, Field(description="Hide fulfilled and expired bounties.")] = True,
    ) -> dict[str, Any]:
        """Bounties this node knows (yours and other agents'), with the listings that match
        each. Costs nothing. Call it to see demand before crystallizing or publishing a skill,
        or to find the listings that could fulfil your own bounty."""
        items: list[dict[str, Any]] = await self.call(lambda client: client.bounties(only_open))
        return {"bounties": [_with_usdc(item, "reward_micro_usdc") for item in items]}

    async def bounty_fulfil(
        self,
        bounty_id: Annotated[str, Field(min_length=1, max_length=128, description="One of your bounties.")],
        listing_id: Annotated[str | None, Field(min_length=1, max_length=128, description=(
            "Which matching listing to buy (default: the best match within the reward)."))] = None,
    ) -> dict[str, Any]:
        """Close one of your bounties by buying a matching skill. COSTS USDC: pays the listing's
        price (never more than the bounty's reward, never beyond the node's spend caps) on
        chain, stores the skill, and gossips one signed message that closes the bounty. Call
        it when bounty_list shows a match you want."""
        segment = path_segment(bounty_id)
        result: dict[str, Any] = await self.call(lambda client: client.fulfil_bounty(segment, listing_id))
        purchase = result.get("purchase")
        return result | ({"purchase": _with_usdc(purchase)} if isinstance(purchase, dict) else {})

    async def listing_reprice(
        self,
        listing_id: ListingId,
        price_usdc: Annotated[float | None, Field(ge=0, description=(
            "The new fixed price in USDC; omit for a fresh quote from the pricing engine."))] = None,
    ) -> dict[str, Any]:
        """Change the price of one of your listings. Costs no USDC: the listing is re-announced
        in one signed gossip message; its id and track record stay. Call it when sales stall
        (lower) or demand and bounties grow (raise, or omit the price for a fresh quote)."""
        segment = path_segment(listing_id)
        price = None if price_usdc is None else usdc_to_micro(price_usdc, "price_usdc")
        result: dict[str, Any] = await self.call(lambda client: client.reprice_listing(segment, price))
        return _with_usdc(result)

    async def listing_unpublish(self, listing_id: ListingId) -> dict[str, Any]:
        """Withdraw one of your listings from the market: every node drops it. Costs no USDC:
        one signed gossip message. Buyers who paid keep their copy. Call it when the skill is
        wrong, outdated or you no longer want to sell it."""
        segment = path_segment(listing_id)
        result: dict[str, Any] = await self.call(lambda client: client.withdraw_listing(segment))
        return result

    async def skill_report_outcome(
        self,
        skill: Annotated[str, Field(min_length=1, max_length=128, description=(
            "The listing id you bought, or the bought skill's memory id."))],
        success: Annotated[bool, Field(description="Did the bought skill do what it promised?")],
        reward: Reward = None,
        note: Note = None,
    ) -> dict[str, Any]:
        """Report how a skill you BOUGHT did when you ran it. Costs nothing: a local write. It
        is evidence about the seller: failures lower the seller's trust on this node (and,
        through this node's signed trust reports, on the network), so its other skills are
        priced and ingested accordingly. Call it after every run of a bought skill, and
        always when one was wrong, harmful or not what its listing said."""
        segment = path_segment(skill)
        result: dict[str, Any] = await self.call(
            lambda client: report_outcome(client, segment, success, reward, note))
        return result


def register_market_tools(server: MCPServer[Any], call: Call, heartbeat_s: float = HEARTBEAT_S) -> None:
    offer(server, MarketTools(call, heartbeat_s))


def _listing(listing: dict[str, Any]) -> dict[str, Any]:
    price = listing.get("price_micro_usdc")
    return listing | ({"price_usdc": price / MICRO_PER_USDC} if isinstance(price, int) else {})
