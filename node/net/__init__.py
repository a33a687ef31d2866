"""libp2p host, gossipsub topics + validators, purchase request/response.

``NetService`` (node.net.service) is the one object the node service runs;
the modules split by concept: ``host`` (key, transports), ``gossip_config``
(gossipsub parameters), ``validation`` (message rules), ``scoring`` (peer
penalties and bans), ``gossip`` (publish / receive), ``peers`` (bootstrap,
reconnect, ban list), ``reqresp`` (purchase protocol transport),
``reachability`` (AutoNAT in ``autonat``, the bounded relay in ``relay``,
reservations and relayed dialling in ``relay_client``, DCUtR: nodes behind
NAT reachable through relays).
"""
