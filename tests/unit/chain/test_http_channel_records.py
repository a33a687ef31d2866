"""``wallet channels`` for the x402 HTTP endpoint (issue 36): the channels that paid this
seller over HTTP, read with the x402 SDK's own ``FileChannelStorage`` from the records its
server scheme writes; a file the SDK could not have written is counted, never a crash."""

from __future__ import annotations

from pathlib import Path

from eth_account import Account
from x402.mechanisms.evm.batch_settlement.server import FileChannelStorage
from x402.mechanisms.evm.batch_settlement.server.storage import Channel

from node.chain.channels import channel_config
from node.chain.x402_channels import http_channel_records

TOKEN = "0x036CbD53842c5426634e7929541eC2318f3dCF7e"


def _record(storage: FileChannelStorage, charged: int, claimed: int, withdraw_at: int = 0) -> str:
    payer, seller = Account.create().address, Account.create().address
    config = channel_config(payer=payer, receiver=seller, receiver_authorizer=seller,
                            token_address=TOKEN)
    channel_id = "0x" + Account.create().key.hex()[-64:]
    channel = Channel(channel_id=channel_id, channel_config=config,
                      charged_cumulative_amount=str(charged), signed_max_claimable=str(charged),
                      balance="1000000", total_claimed=str(claimed),
                      withdraw_requested_at=withdraw_at, last_request_timestamp=1_700_000_000_000)
    storage.update_channel(channel_id, lambda _: channel)  # what the SDK's server scheme does
    return channel_id


def test_each_channel_shows_what_was_charged_claimed_and_is_unclaimed(tmp_path: Path) -> None:
    storage = FileChannelStorage(str(tmp_path))
    first = _record(storage, charged=45_000, claimed=30_000)
    second = _record(storage, charged=15_000, claimed=0, withdraw_at=1_800_000_000)

    found = http_channel_records(tmp_path)
    rows = {row["channel_id"]: row for row in found["channels"]}
    assert found["unreadable"] == 0 and set(rows) == {first.lower(), second.lower()}
    assert (rows[first.lower()]["charged_micro_usdc"], rows[first.lower()]["claimed_micro_usdc"],
            rows[first.lower()]["unclaimed_micro_usdc"]) == (45_000, 30_000, 15_000)
    assert rows[second.lower()]["withdraw_requested_at_s"] == 1_800_000_000
    assert rows[second.lower()]["deposit_micro_usdc"] == 1_000_000


def test_a_store_never_written_is_empty(tmp_path: Path) -> None:
    assert http_channel_records(tmp_path / "x402-channels") == {"channels": [], "unreadable": 0}


def test_files_the_sdk_did_not_write_are_counted_not_parsed_into_a_crash(tmp_path: Path) -> None:
    storage = FileChannelStorage(str(tmp_path))
    good = _record(storage, charged=10_000, claimed=0)
    server = tmp_path / "server"
    (server / ("0x" + "11" * 32 + ".json")).write_text("[" * 100_000 + "]" * 100_000)
    (server / ("0x" + "22" * 32 + ".json")).write_text("{not json")
    (server / ("0x" + "33" * 32 + ".json")).write_text('{"channelId": 7}')
    (server / ("0x" + "44" * 32 + ".json")).write_bytes(b"0" * (1 << 20))

    found = http_channel_records(tmp_path)
    assert [row["channel_id"] for row in found["channels"]] == [good.lower()]
    assert found["unreadable"] == 4
