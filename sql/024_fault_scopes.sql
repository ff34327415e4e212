-- Every fault has a scope (delivery/classification/): `account` (every message of the channel would
-- meet it), `route` (our sender towards one route: an SMS destination country, an email receiving
-- domain) or `message` (holds nothing). channel_holds keeps a run of faults and a hold for each
-- scope that can hold anything: the whole channel (`route` '') for account faults, and one route of
-- it for route faults (sql/definitions/19 and 20 for the channel; 26 and outbox/claim.sql for a route).
--   route         '' for the whole channel; else an SMS destination's ISO country ('FR') or an email
--                 receiving domain ('example.com'): never a whole destination
--   scope         'account' for the whole channel, 'route' for one route (derived from `route`)
--   attempts      a route's sends settled since its run started (counted only while a run is open)
--   destinations  the distinct destinations the run's faults came from: their keyed digests (the
--                 suppression list's exact keys), never an address; at most as many as a hold needs
--   accounts      the distinct accounts likewise (hashes of account_id)
ALTER TABLE channel_holds ADD COLUMN route text NOT NULL DEFAULT ''
    CONSTRAINT channel_holds_route CHECK (route = '' OR route ~ '^[^@[:space:]]{1,253}$');
ALTER TABLE channel_holds DROP CONSTRAINT channel_holds_pkey;
ALTER TABLE channel_holds ADD PRIMARY KEY (channel, route);
ALTER TABLE channel_holds
    ADD COLUMN scope text GENERATED ALWAYS AS (CASE WHEN route = '' THEN 'account' ELSE 'route' END) STORED,
    ADD COLUMN attempts integer NOT NULL DEFAULT 0 CONSTRAINT channel_holds_attempts CHECK (attempts >= 0),
    ADD COLUMN destinations bytea[] NOT NULL DEFAULT '{}'
        CONSTRAINT channel_holds_destinations CHECK (cardinality(destinations) <= 1000),
    ADD COLUMN accounts bigint[] NOT NULL DEFAULT '{}'
        CONSTRAINT channel_holds_accounts CHECK (cardinality(accounts) <= 1000);
