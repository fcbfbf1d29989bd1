#!/usr/bin/python3
"""A third-party WebSocket client for hlbook's tests: Python's `websockets` library (Debian 12 ships 10.4).

Connects, optionally pings, subscribes to the subscriptions given as a JSON list, collects what the server sends
for a number of seconds or data frames, and prints JSON lines on stdout:

  {"event": "open", "extensions": <Sec-WebSocket-Extensions response header or null>}
  {"event": "recv", "text": <one server message, exactly as received>}      (one per message)
  {"event": "done", "reason": "frames" | "seconds" | "closed", "sent": N, "sent_compressed": N, ...}

`sent_compressed` counts the client's messages that went out with RSV1 set (the library compresses every data frame
once permessage-deflate is negotiated, and the count proves it did); `received_compressed` counts the server's
messages that arrived with RSV1 set, out of `received`.
"""

import argparse
import asyncio
import json
import sys
import time

import websockets
from websockets.frames import Opcode

CONTROL_CHANNELS = {"subscriptionResponse", "pong", "error", "post"}


def emit(obj):
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.stdout.flush()


def count_compressed(ws, counts):
    """Wraps each negotiated extension to count data frames that leave, or arrive, with RSV1 set."""
    for ext in ws.extensions:
        encode, decode = ext.encode, ext.decode

        def counting_encode(frame, encode=encode):
            out = encode(frame)
            if out.rsv1:
                counts["sent"] += 1
            return out

        def counting_decode(frame, *, max_size=None, decode=decode):
            if frame.rsv1 and frame.opcode in (Opcode.TEXT, Opcode.BINARY):
                counts["received"] += 1
            return decode(frame, max_size=max_size)

        ext.encode, ext.decode = counting_encode, counting_decode


async def run(args):
    subs = json.loads(args.subscriptions)
    compression = None if args.compression == "none" else "deflate"
    async with websockets.connect(
        args.uri, compression=compression, max_size=args.max_size, ping_interval=None, open_timeout=10
    ) as ws:
        emit({"event": "open", "extensions": ws.response_headers.get("Sec-WebSocket-Extensions")})
        compressed = {"sent": 0, "received": 0}
        count_compressed(ws, compressed)
        sent = 0
        if args.ping:
            await ws.send(json.dumps({"method": "ping"}))
            sent += 1
        for s in subs:
            await ws.send(json.dumps({"method": "subscribe", "subscription": s}))
            sent += 1
        deadline = time.monotonic() + args.seconds
        data_frames = received = 0
        reason = "seconds"
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                break
            try:
                text = await asyncio.wait_for(ws.recv(), timeout=left)
            except asyncio.TimeoutError:
                break
            except websockets.ConnectionClosed as e:
                reason = f"closed: {e}"
                break
            if isinstance(text, bytes):
                text = text.decode()
            received += 1
            emit({"event": "recv", "text": text})
            try:
                channel = json.loads(text).get("channel")
            except (ValueError, AttributeError):
                channel = None
            if channel not in CONTROL_CHANNELS:
                data_frames += 1
                if args.frames and data_frames >= args.frames:
                    reason = "frames"
                    break
        emit({"event": "done", "reason": reason, "sent": sent, "sent_compressed": compressed["sent"],
              "received": received, "received_compressed": compressed["received"], "data_frames": data_frames})


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("uri", help="ws://HOST:PORT/ws")
    p.add_argument("subscriptions", help='JSON list, e.g. [{"type":"l2Book","coin":"BTC"}]')
    p.add_argument("--compression", choices=["deflate", "none"], default="deflate")
    p.add_argument("--seconds", type=float, default=5.0, help="stop collecting after this long")
    p.add_argument("--frames", type=int, default=0, help="stop after this many data frames (0: no limit)")
    p.add_argument("--ping", action="store_true", help='send {"method":"ping"} before subscribing')
    p.add_argument("--max-size", type=int, default=64 << 20, help="largest message accepted from the server")
    asyncio.run(run(p.parse_args()))


if __name__ == "__main__":
    main()
