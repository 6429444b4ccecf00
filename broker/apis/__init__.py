"""Request handlers (Kafka's ``KafkaApis``): one module per API, dispatched by ``kafka_apis``."""
