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


def encode(msg):
    """The frame of msg (a dict without cycles), newline included. Text that
    is not valid Unicode (lone surrogates) is replaced, never an error."""
    return _encode_text(msg).encode("utf-8", "replace") + b"\n"


def decode(line):
    """The value of one frame (UTF-8 bytes, newline optional). Raises
    ValueError, as json.loads does, for anything that is not one JSON value."""
    text = line.decode("utf-8", "surrogatepass").strip(" \t\r\n")
    value, end = _decoder.raw_decode(text)
    if end != len(text):
        raise json.JSONDecodeError("Extra data", text, end)
    return value
