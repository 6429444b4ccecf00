"""Coordinators hosted by the broker (Kafka's ``kafka.coordinator``): the classic-protocol group
coordinator in :mod:`broker.coordinator.group`."""
