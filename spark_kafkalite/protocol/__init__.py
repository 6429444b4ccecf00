"""Pure protocol code shared by the broker and the client: framing, API keys, errors and
RecordBatch v2. No I/O; imports nothing else of this project."""
