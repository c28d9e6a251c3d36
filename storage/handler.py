"""The storage's pure logic: message in, messages and state changes out, no Kafka.

Built in issue 7; the kernel contract it implements is `streamcrawl.handler.Handler`.
"""
