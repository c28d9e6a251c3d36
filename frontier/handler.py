"""The frontier's pure logic: message in, messages and state changes out, no Kafka.

Built in issue 3; the kernel contract it implements is `streamcrawl.handler.Handler`.
"""
