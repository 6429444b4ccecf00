"""Broker security (Kafka's ``org.apache.kafka.common.security`` and the metadata authorizer):
the ACL authorizer, ACL control and store; SASL server mechanisms (PLAIN, SCRAM), the SASL
authenticator of a connection, JAAS configuration parsing and the SCRAM credential cache."""
