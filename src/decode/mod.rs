//! Sans-IO stream decoders: bytes in, events out. No async, no IO.
