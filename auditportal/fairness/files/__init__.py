"""The files the core reads and writes: tabular datasets (tabular), the shards the trainer reads
(sharding), the trainer's metrics file (metricsfile), and the one key encoding of attribute and
group tuples they share (intersections)."""
