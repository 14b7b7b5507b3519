"""agentbox frames: one JSON object per line, as the init and the kernel worker
write and read them (the init with its clients, and the two with each other).

Both functions sit on the path of every execution, several times, and the
json module's conveniences cost more than the work there: json.dumps builds a
JSONEncoder, whose encode builds a C encoder, on every call, and json.loads
guesses the encoding and wraps the C scanner in three Python calls. Measured
in the sandbox with cold caches (as they are between two executions), each
convenience costs two to three times the encoding or decoding itself.

Standard library only.
"""

import json
import re


def _text_encoder():
    """Returns a function that renders a frame as compact JSON text: the C
    encoder built once (the very call JSONEncoder.encode makes each time), if
    it gives what JSONEncoder gives; JSONEncoder otherwise."""
    slow = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), check_circular=False)
    try:
        from json.encoder import c_make_encoder, encode_basestring

        fast = c_make_encoder(None, slow.default, encode_basestring, None, ":", ",", False, False, True)
        probe = {"s": "é\n\"\ud800", "n": [1, -2.5, None, True], "d": {}}
        if "".join(fast(probe, 0)) == slow.encode(probe):
            return lambda msg: "".join(fast(msg, 0))
    except Exception:
        pass
    return slow.encode


_encode_text = _text_encoder()
_decoder = json.JSONDecoder()


# Control characters other than the three escaped below by hand.
_RARE_CONTROL = re.compile(rb"[\x00-\x08\x0b\x0c\x0e-\x1f]")
_BIG_TEXT = 8192


def _encode_stream(msg):
    """A large stream frame with the text escaped by bytes.replace, about
    twice as fast as the JSON encoder on a megabyte of output; None when
    the text holds a control character this does not handle. The key order
    is the one the Go client's fast path expects."""
    b = msg["text"].encode("utf-8", "replace")
    for raw, esc in ((b"\\", b"\\\\"), (b'"', b'\\"'), (b"\n", b"\\n"), (b"\r", b"\\r"), (b"\t", b"\\t")):
        if raw in b:
            b = b.replace(raw, esc)
    if _RARE_CONTROL.search(b):
        return None
    head = _encode_text({"type": "stream", "id": msg["id"], "name": msg["name"]})
    return head[:-1].encode("utf-8", "replace") + b',"text":"' + b + b'"}\n'


def encode(msg):
    """The frame of msg (a dict without cycles), newline included. Text that
    is not valid Unicode (lone surrogates) is replaced, never an error."""
    if msg.get("type") == "stream" and len(msg) == 4 and len(msg.get("text", "")) > _BIG_TEXT:
        frame = _encode_stream(msg)
        if frame is not None:
            return frame
    return _encode_text(msg).encode("utf-8", "replace") + b"\n"


def decode(line):
    """The value of one frame (UTF-8 bytes, newline optional). Raises
    ValueError, as json.loads does, for anything that is not one JSON value."""
    text = line.decode("utf-8", "surrogatepass").strip(" \t\r\n")
    value, end = _decoder.raw_decode(text)
    if end != len(text):
        raise json.JSONDecodeError("Extra data", text, end)
    return value
