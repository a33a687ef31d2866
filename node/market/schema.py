"""Tables of the market concept (listing book, sales, purchases) and their migrations.

Versions 1, 2 and 3 were migrations 3, 4 and 6 of the single list used before
per-concept versions (``node.db.LEGACY_MIGRATIONS``).
"""

from __future__ import annotations

from node.db import Migration

CONCEPT = "market"

MIGRATIONS: list[Migration] = [
    # 1: the listing book (skill listings known from gossip, own ones included)
    [
        """
        CREATE TABLE listings (
            listing_id TEXT PRIMARY KEY,
            seller_key TEXT NOT NULL,
            stable_skill_id TEXT NOT NULL,
            skill_version INTEGER NOT NULL,
            name TEXT NOT NULL,
            description TEXT NOT NULL,
            tags_json TEXT NOT NULL,
            category TEXT NOT NULL,
            content_hash TEXT NOT NULL,
            size_bytes INTEGER NOT NULL,
            price_micro_usdc INTEGER NOT NULL,
            pay_to TEXT NOT NULL,
            chain_id INTEGER NOT NULL,
            token_address TEXT NOT NULL,
            executions INTEGER NOT NULL,
            successes INTEGER NOT NULL,
            reward_sum_ppm INTEGER NOT NULL,
            unique_buyers INTEGER NOT NULL,
            expires_at_ms INTEGER NOT NULL,
            previous_listing_id TEXT,
            endorsed_by TEXT,
            issued_at_ms INTEGER NOT NULL,
            received_at_ms INTEGER NOT NULL,
            superseded_by TEXT,
            own_crystal_id TEXT,
            envelope BLOB NOT NULL,
            embedding BLOB
        )
        """,
        "CREATE INDEX listings_skill ON listings(seller_key, stable_skill_id, skill_version)",
        "CREATE INDEX listings_expiry ON listings(expires_at_ms)",
    ],

    # 2: marketplace ledgers. The seller records a sale before settling it and the
    # buyer records a purchase before paying, so neither side forgets money moved.
    [
        """
        CREATE TABLE sales (
            request_id TEXT PRIMARY KEY,
            listing_id TEXT NOT NULL,
            crystal_id TEXT NOT NULL,
            stable_skill_id TEXT NOT NULL,
            buyer_key TEXT NOT NULL,
            buyer_address TEXT NOT NULL,
            price_micro_usdc INTEGER NOT NULL,
            auth_nonce TEXT,
            state TEXT NOT NULL,
            tx_hash TEXT,
            reason TEXT,
            created_at_ms INTEGER NOT NULL,
            updated_at_ms INTEGER NOT NULL
        )
        """,
        "CREATE INDEX sales_listing ON sales(listing_id, buyer_key)",
        "CREATE INDEX sales_tx ON sales(tx_hash)",
        """
        CREATE TABLE purchases (
            request_id TEXT PRIMARY KEY,
            listing_id TEXT NOT NULL,
            seller_key TEXT NOT NULL,
            name TEXT NOT NULL,
            price_micro_usdc INTEGER NOT NULL,
            pay_to TEXT NOT NULL,
            auth_nonce TEXT,
            state TEXT NOT NULL,
            tx_hash TEXT,
            crystal_id TEXT,
            reason TEXT,
            created_at_ms INTEGER NOT NULL,
            updated_at_ms INTEGER NOT NULL
        )
        """,
        "CREATE INDEX purchases_listing ON purchases(listing_id)",
        "CREATE INDEX purchases_created ON purchases(created_at_ms)",
    ],

    # 3: a purchase keeps the authorization it signed (so a retry resends it instead of
    # signing a second payment) until when it can settle, and a paid delivery the
    # ingestion gate kept out of memory (the buyer still owns what it paid for).
    [
        "ALTER TABLE purchases ADD COLUMN authorization_json TEXT",
        "ALTER TABLE purchases ADD COLUMN valid_before_s INTEGER",
        "ALTER TABLE purchases ADD COLUMN payload TEXT",
    ],
]

MIGRATIONS.append([
    # 4: the market's newest state per (seller, skill) and per bounty: the lifecycle
    # (node.market.book.lifecycle) and the listings sync cursor (sync_seq); open bounties.
    """
    CREATE TABLE market_feed (
        sync_seq INTEGER PRIMARY KEY AUTOINCREMENT,
        feed_key TEXT NOT NULL UNIQUE,
        kind TEXT NOT NULL,
        skill_version INTEGER NOT NULL,
        seq INTEGER NOT NULL,
        expires_at_ms INTEGER NOT NULL,
        envelope BLOB NOT NULL
    )
    """,
    "CREATE INDEX market_feed_expiry ON market_feed(expires_at_ms)",
    """
    CREATE TABLE bounties (
        sender_key TEXT NOT NULL,
        bounty_id TEXT NOT NULL,
        text TEXT NOT NULL,
        reward_micro_usdc INTEGER NOT NULL,
        expires_at_ms INTEGER NOT NULL,
        fulfilled_by TEXT,
        issued_at_ms INTEGER NOT NULL,
        received_at_ms INTEGER NOT NULL,
        own INTEGER NOT NULL,
        embedding BLOB,
        PRIMARY KEY (sender_key, bounty_id)
    )
    """,
])

MIGRATIONS.append([
    # 5: the newest endorse/revoke act per (listing, management key), so a revoked
    # endorsement stays revoked: an older endorsement (replayed, or embedded in the seller's
    # re-announcement) cannot bring it back; a newer explicit endorsement can.
    """
    CREATE TABLE endorsement_states (
        listing_id TEXT NOT NULL,
        management_key TEXT NOT NULL,
        revoked INTEGER NOT NULL,
        at_ms INTEGER NOT NULL,
        PRIMARY KEY (listing_id, management_key)
    )
    """,
])

MIGRATIONS.append([
    # 6: skill warnings this node accepted (node.market.warnings): a warned listing id or
    # content hash never enters the book again, whichever way it arrives.
    """
    CREATE TABLE skill_warnings (
        target TEXT PRIMARY KEY,
        reason TEXT NOT NULL,
        senders_json TEXT NOT NULL,
        accepted_at_ms INTEGER NOT NULL
    )
    """,
])

MIGRATIONS.append([
    # 7: x402 batch-settlement channels (node.market.purchase.channels.ledger). The buyer keeps
    # each channel it pays through and the highest voucher it ever signed (its exposure) apart
    # from what the seller acknowledged (the next voucher's base); the seller keeps each
    # channel paying it, the newest voucher it recorded (what it may claim) and the chain
    # state it last read; claims are journaled before they are broadcast. Sales and purchases
    # say which scheme paid and, for a voucher, the channel and its total after the purchase.
    """
    CREATE TABLE buyer_channels (
        channel_id TEXT PRIMARY KEY,
        seller_key TEXT NOT NULL,
        receiver TEXT NOT NULL,
        token TEXT NOT NULL,
        terms_json TEXT NOT NULL,
        deposited_micro_usdc INTEGER NOT NULL,
        pending_deposit_json TEXT,
        charged_total INTEGER NOT NULL,
        signed_total INTEGER NOT NULL,
        state TEXT NOT NULL,
        refund_tx TEXT,
        refunded_micro_usdc INTEGER NOT NULL DEFAULT 0,
        created_at_ms INTEGER NOT NULL,
        updated_at_ms INTEGER NOT NULL
    )
    """,
    "CREATE INDEX buyer_channels_receiver ON buyer_channels(receiver, token)",
    """
    CREATE TABLE seller_channels (
        channel_id TEXT PRIMARY KEY,
        payer TEXT NOT NULL,
        buyer_key TEXT NOT NULL,
        terms_json TEXT NOT NULL,
        charged_total INTEGER NOT NULL,
        voucher_signature TEXT,
        claimed_total INTEGER NOT NULL,
        balance INTEGER NOT NULL,
        withdraw_requested_at_s INTEGER NOT NULL,
        synced_at_ms INTEGER NOT NULL,
        first_unclaimed_at_ms INTEGER,
        state TEXT NOT NULL,
        updated_at_ms INTEGER NOT NULL
    )
    """,
    """
    CREATE TABLE channel_claims (
        claim_id TEXT PRIMARY KEY,
        tx_hash TEXT,
        claims_json TEXT NOT NULL,
        total_micro_usdc INTEGER NOT NULL,
        state TEXT NOT NULL,
        gas_used INTEGER,
        reason TEXT,
        created_at_ms INTEGER NOT NULL,
        updated_at_ms INTEGER NOT NULL
    )
    """,
    "ALTER TABLE sales ADD COLUMN scheme TEXT NOT NULL DEFAULT 'exact'",
    "ALTER TABLE sales ADD COLUMN channel_id TEXT",
    "ALTER TABLE sales ADD COLUMN voucher_total INTEGER",
    "CREATE INDEX sales_channel ON sales(channel_id, voucher_total)",
    "ALTER TABLE purchases ADD COLUMN scheme TEXT NOT NULL DEFAULT 'exact'",
    "ALTER TABLE purchases ADD COLUMN channel_id TEXT",
    "ALTER TABLE purchases ADD COLUMN voucher_total INTEGER",
    "ALTER TABLE purchases ADD COLUMN voucher_signature TEXT",
])

MIGRATIONS.append([
    # 8: the buyer's timed withdrawal (``wallet withdraw``): when it was started on chain (unix
    # seconds, the chain's clock) and how much it asked for; 0 while none is pending.
    "ALTER TABLE buyer_channels ADD COLUMN withdraw_requested_at_s INTEGER NOT NULL DEFAULT 0",
    "ALTER TABLE buyer_channels ADD COLUMN withdraw_micro_usdc INTEGER NOT NULL DEFAULT 0",
])

SCHEMA_VERSION = len(MIGRATIONS)
