"""KIP-932 share groups: the share group coordinator (membership and assignment) and the
share-partition state held by each partition leader (Kafka's ``SharePartition`` /
``SharePartitionManager``)."""
