"""Cluster metadata: the metadata image the broker applies and the controllers (single-node and
Raft quorum), with their control managers of topics, configs, ACLs, SCRAM credentials and
producer id blocks."""
