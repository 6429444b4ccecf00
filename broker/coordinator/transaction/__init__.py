"""Kafka's transaction coordinator (``kafka.coordinator.transaction``, KIP-98): the state of
every transactional id in the internal ``__transaction_state`` topic
(:mod:`.transaction_state_manager`), its state machine (:mod:`.transaction_metadata`), the
request logic of InitProducerId / AddPartitionsToTxn / AddOffsetsToTxn / EndTxn
(:mod:`.transaction_coordinator`), the WriteTxnMarkers sender to partition leaders
(:mod:`.transaction_marker_channel_manager`) and the broker wiring (:mod:`.service`)."""
