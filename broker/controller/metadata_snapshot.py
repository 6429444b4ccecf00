"""A metadata image as the records of a snapshot, and the delta between the current image and
one loaded from a snapshot (Kafka's ``MetadataImage.write`` through an ``ImageWriter``, and the
``MetadataDelta`` that ``MetadataLoader`` publishes when a snapshot replaces the image).

The Raft quorum writes :func:`image_to_records` into its snapshots
(:mod:`broker.controller.quorum`); a node that loads one rebuilds the image with
:meth:`~broker.controller.metadata_image.MetadataImage.apply` and publishes
:func:`diff_images` of the old and the new image, as if the records in between had been applied.
"""

from __future__ import annotations

from broker.controller.metadata_image import (
    RESOURCE_TYPE_TOPIC,
    AccessControlEntryRecord,
    ConfigRecord,
    MetadataDelta,
    MetadataImage,
    MetadataRecord,
    PartitionRecord,
    PartitionRegistration,
    ProducerIdsRecord,
    RegisterBrokerRecord,
    TopicRecord,
    UserScramCredentialRecord,
)

__all__ = ["image_to_records", "diff_images"]


def image_to_records(image: MetadataImage) -> list[MetadataRecord]:
    """Records that rebuild ``image`` from an empty one (a metadata snapshot, as KRaft's
    ``MetadataImage.write``); the offset is not part of it."""
    records: list[MetadataRecord] = []
    for node_id in sorted(image.brokers):
        b = image.brokers[node_id]
        records.append(RegisterBrokerRecord(node_id, dict(b.endpoints), b.rack, b.epoch, b.fenced))
    for name in sorted(image.topics):
        topic = image.topics[name]
        records.append(TopicRecord(name, topic.topic_id))
        for p in topic.partitions.values():
            records.append(
                PartitionRecord(
                    topic.topic_id,
                    p.partition,
                    p.replicas,
                    p.isr,
                    p.leader,
                    p.leader_epoch,
                    p.partition_epoch,
                )
            )
        for key, value in image.topic_config(name).items():
            records.append(ConfigRecord(RESOURCE_TYPE_TOPIC, name, key, value))
    for (resource_type, resource_name), entries in sorted(image.resource_configs.items()):
        records.extend(ConfigRecord(resource_type, resource_name, k, v) for k, v in entries.items())
    if image.next_producer_id:
        records.append(ProducerIdsRecord(-1, -1, image.next_producer_id))
    records.extend(AccessControlEntryRecord(acl_id, acl) for acl_id, acl in image.acls.items())
    records.extend(
        UserScramCredentialRecord(name, mechanism, credential)
        for (name, mechanism), credential in sorted(image.scram_credentials.items())
    )
    return records


def diff_images(old: MetadataImage, new: MetadataImage) -> MetadataDelta:
    """The delta between two images (used when a whole snapshot replaces the image): topics
    created / deleted (by id), partitions whose registration differs, topics whose configs
    differ, brokers whose registration differs."""
    old_ids = {t.topic_id: t for t in old.topics.values()}
    new_ids = {t.topic_id: t for t in new.topics.values()}
    created = tuple(t for tid, t in new_ids.items() if tid not in old_ids)
    deleted = tuple(t for tid, t in old_ids.items() if tid not in new_ids)
    changed: list[tuple[str, PartitionRegistration]] = []
    for tid, topic in new_ids.items():
        before = old_ids.get(tid)
        for index, p in topic.partitions.items():
            if before is None or before.partitions.get(index) != p:
                changed.append((topic.name, p))
    configs = tuple(
        name
        for name in new.topics
        if new.topics[name].topic_id in old_ids
        and dict(new.topic_config(name)) != dict(old.topic_config(name))
    )
    brokers = tuple(
        b for b in set(old.brokers) | set(new.brokers) if old.brokers.get(b) != new.brokers.get(b)
    )
    resources = tuple(
        key
        for key in sorted(set(old.resource_configs) | set(new.resource_configs))
        if dict(old.resource_configs.get(key, {})) != dict(new.resource_configs.get(key, {}))
    )
    return MetadataDelta(created, deleted, tuple(changed), configs, tuple(sorted(brokers)), resources)
