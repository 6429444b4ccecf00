"""Broker security (Kafka's ``org.apache.kafka.common.security`` and the metadata authorizer):
the ACL authorizer; SASL server mechanisms (PLAIN, SCRAM), the SASL authenticator of a connection,
JAAS configuration parsing and the SCRAM credential cache. ACLs and SCRAM credentials are changed
by the controller (:mod:`broker.controller.acl_control`, :mod:`broker.controller.scram_control`,
Kafka's ``AclControlManager`` / ``ScramControlManager``)."""
