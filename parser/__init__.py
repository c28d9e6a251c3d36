"""The parser service: links, anchors, rel types, positions, context, page metadata (DESIGN 3.6)."""
