"""MCP tools that close the agent's skill loop: record runs, crystallize, bounties, re-price,
unpublish, and report how a bought skill did.

Registered by :func:`node.agent.mcp_server.build_server`; each tool is one or two calls of
the node's typed client. Every description says what the call costs (USDC, signed network
messages, or nothing but a local write) and when an agent should make it, because an
agent decides from the description alone.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Annotated, Any

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from pydantic import Field

from node.api import ApiClient, ApiError

Call = Callable[[Callable[[ApiClient], Any]], Awaitable[Any]]
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


def path_segment(value: str) -> str:
    """``value`` as one URL path segment of the node's API, or a tool error."""
    if "/" in value or "?" in value or "#" in value or value in {".", ".."}:
        raise ToolError(f"not a valid id: {value!r}")
    return value


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


def purchases_of(client: ApiClient, listing_id: str, limit: int = 50) -> list[dict[str, Any]]:
    """This node's newest purchases of one listing (newest first)."""
    return [row for row in client.purchases(limit) if row.get("listing_id") == listing_id]


def purchase_step(state: object) -> tuple[float, str] | None:
    """(steps done, the step under way) for a purchase in ``state``; None before it has a row."""
    done = _STEPS_DONE.get(state) if isinstance(state, str) else None
    if done is None:
        return None
    return float(done), PURCHASE_STEPS[done]


def bought_skill(client: ApiClient, ref: str) -> dict[str, Any]:
    """The crystal of a skill this node bought: ``ref`` is the listing id or the crystal id."""
    try:
        crystal = client.memory_get(ref)
    except ApiError as error:
        if error.status != 404:
            raise
        purchase = next((p for p in client.purchases(1000)
                         if p.get("listing_id") == ref and p.get("crystal_id")), None)
        if purchase is None:
            raise ToolError(f"{ref} is neither a skill memory nor a listing this node bought "
                            "and stored") from error
        crystal = client.memory_get(purchase["crystal_id"])
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


def register_market_tools(server: MCPServer[Any], call: Call) -> None:
    @server.tool()
    async def skill_record_execution(
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
        crystal: dict[str, Any] = await call(
            lambda client: client.record_execution(segment, success, reward, note))
        return {"id": crystal["id"], "executions": crystal.get("executions"),
                "successes": crystal.get("successes"), "reward_sum": crystal.get("rewardSum"),
                "confidence_before": crystal.get("confidenceBefore"),
                "confidence": crystal.get("confidence"), "note": note}

    @server.tool()
    async def skill_crystallize(
        crystal_id: Annotated[str, Field(min_length=1, max_length=128, description=(
            "Id of an emerging skill (a task pattern listed under Emerging Skills in MEMORY.md)."))],
        text: Annotated[str | None, Field(min_length=1, max_length=65536, description=(
            "The skill's instructions (default: the pattern's text).")) ] = None,
        category: Annotated[str | None, Field(min_length=1, max_length=64)] = None,
        tags: Annotated[list[Annotated[str, Field(min_length=1, max_length=32)]] | None,
                        Field(max_length=16)] = None,
    ) -> dict[str, Any]:
        """Turn an emerging skill (a pattern you keep repeating) into a skill memory you can run,
        record and later sell. Costs nothing: a local write. Call it when MEMORY.md lists an
        Emerging Skill you use; then record its runs with skill_record_execution."""
        segment = path_segment(crystal_id)
        crystal: dict[str, Any] = await call(
            lambda client: client.crystallize_skill(segment, text, category, tags or ()))
        return {"id": crystal["id"], "type": crystal.get("semanticType"),
                "executions": crystal.get("executions"), "successes": crystal.get("successes")}

    @server.tool()
    async def bounty_post(
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
        result: dict[str, Any] = await call(lambda client: client.post_bounty(text, reward, ttl_seconds))
        return _with_usdc(result, "reward_micro_usdc")

    @server.tool()
    async def bounty_list(
        only_open: Annotated[bool, Field(description="Hide fulfilled and expired bounties.")] = True,
    ) -> dict[str, Any]:
        """Bounties this node knows (yours and other agents'), with the listings that match
        each. Costs nothing. Call it to see demand before crystallizing or publishing a skill,
        or to find the listings that could fulfil your own bounty."""
        items: list[dict[str, Any]] = await call(lambda client: client.bounties(only_open))
        return {"bounties": [_with_usdc(item, "reward_micro_usdc") for item in items]}

    @server.tool()
    async def bounty_fulfil(
        bounty_id: Annotated[str, Field(min_length=1, max_length=128, description="One of your bounties.")],
        listing_id: Annotated[str | None, Field(min_length=1, max_length=128, description=(
            "Which matching listing to buy (default: the best match within the reward)."))] = None,
    ) -> dict[str, Any]:
        """Close one of your bounties by buying a matching skill. COSTS USDC: pays the listing's
        price (never more than the bounty's reward, never beyond the node's spend caps) on
        chain, stores the skill, and gossips one signed message that closes the bounty. Call
        it when bounty_list shows a match you want."""
        segment = path_segment(bounty_id)
        result: dict[str, Any] = await call(lambda client: client.fulfil_bounty(segment, listing_id))
        purchase = result.get("purchase")
        return result | ({"purchase": _with_usdc(purchase)} if isinstance(purchase, dict) else {})

    @server.tool()
    async def listing_reprice(
        listing_id: ListingId,
        price_usdc: Annotated[float | None, Field(ge=0, description=(
            "The new fixed price in USDC; omit for a fresh quote from the pricing engine."))] = None,
    ) -> dict[str, Any]:
        """Change the price of one of your listings. Costs no USDC: the listing is re-announced
        in one signed gossip message; its id and track record stay. Call it when sales stall
        (lower) or demand and bounties grow (raise, or omit the price for a fresh quote)."""
        segment = path_segment(listing_id)
        price = None if price_usdc is None else usdc_to_micro(price_usdc, "price_usdc")
        result: dict[str, Any] = await call(lambda client: client.reprice_listing(segment, price))
        return _with_usdc(result)

    @server.tool()
    async def listing_unpublish(listing_id: ListingId) -> dict[str, Any]:
        """Withdraw one of your listings from the market: every node drops it. Costs no USDC:
        one signed gossip message. Buyers who paid keep their copy. Call it when the skill is
        wrong, outdated or you no longer want to sell it."""
        segment = path_segment(listing_id)
        result: dict[str, Any] = await call(lambda client: client.withdraw_listing(segment))
        return result

    @server.tool()
    async def skill_report_outcome(
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
        result: dict[str, Any] = await call(
            lambda client: report_outcome(client, segment, success, reward, note))
        return result
