"""Kafka's SocketServer on asyncio: acceptor, per-connection processor, request framing."""
