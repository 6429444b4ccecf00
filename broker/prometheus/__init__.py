"""The broker's Prometheus endpoint: ``/metrics`` served by ``prometheus_client`` from its own
thread, with the names the Prometheus JMX exporter's Kafka rules give Kafka's MBeans (see
``docs/monitoring.md``) and kafka_exporter's consumer-group lag names."""
