"""A transcription service in the shape of the seed's SenseVoice `python main.py`.

Python 3 standard library only. It reads SENSEVOICE_DEVICE, SENSEVOICE_HOST and
SENSEVOICE_PORT as the seed's service does, answers GET /health, and transcribes
on POST /v1/audio/transcriptions (OpenAI verbose_json) and POST /api/v1/asr
(SenseVoice api.py: files + keys + lang, {"result": [{"key", "text"}]}). The
"transcript" echoes what the app saw: its device (and CUDA_VISIBLE_DEVICES on
the OpenAI route), its pid and the audio's size.

Test knobs (environment):
  APP_STATE_DIR  writes pid (the app's pid) and worker (its worker's pid) there;
                 a file "block" there makes the next transcription take it and
                 hang (for kill -9 mid-job); each request writes "request".
  APP_HEALTH     "never": /health answers 503 forever.
  APP_EXIT       exit at start with this status, after printing a line.
  APP_WORKER     "1": start a worker process in the app's process group.
  APP_GPU_BYTES  allocate this much GPU memory at start through the driver API
                 (libcuda, ctypes) on SENSEVOICE_DEVICE, as a model load would.
  APP_BARRIER    N: each transcription waits (at most APP_BARRIER_TIMEOUT seconds,
                 default 30) until N transcriptions have been in flight at once; the
                 transcript ends with " inflight=K", the most seen at once.
"""
import json
import os
import subprocess
import sys
import threading
import time
from email.parser import BytesParser
from email.policy import default as default_policy
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

DEVICE = os.environ.get("SENSEVOICE_DEVICE", "auto")
HOST = os.environ.get("SENSEVOICE_HOST", "0.0.0.0")
PORT = int(os.environ.get("SENSEVOICE_PORT", "50000"))
STATE = os.environ.get("APP_STATE_DIR", "")


def state_file(name, text):
    if STATE:
        tmp = os.path.join(STATE, "%s.tmp.%d" % (name, threading.get_ident()))  # requests run concurrently
        with open(tmp, "w") as f:
            f.write(text)
        os.replace(tmp, os.path.join(STATE, name))


def parse_form(handler):
    length = int(handler.headers.get("Content-Length", "0") or 0)
    if handler.headers.get("Transfer-Encoding", "") == "chunked":
        body = read_chunked(handler.rfile)
    else:
        body = handler.rfile.read(length)
    head = b"Content-Type: " + handler.headers["Content-Type"].encode() + b"\r\n\r\n"
    msg = BytesParser(policy=default_policy).parsebytes(head + body)
    fields, files = {}, {}
    for part in msg.iter_parts():
        name = part.get_param("name", header="content-disposition")
        data = part.get_payload(decode=True) or b""
        if part.get_filename() is not None:
            files[name] = data
        else:
            fields[name] = data.decode()
    return fields, files


def read_chunked(rfile):
    out = b""
    while True:
        size = int(rfile.readline().strip() or b"0", 16)
        if size == 0:
            rfile.readline()
            return out
        out += rfile.read(size)
        rfile.readline()


# INFLIGHT counts the transcriptions in flight (APP_BARRIER).
INFLIGHT = threading.Condition()
INFLIGHT.now = 0
INFLIGHT.peak = 0


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive

    def log_message(self, fmt, *args):
        print("request: " + fmt % args, flush=True)

    def reply(self, status, obj):
        body = json.dumps(obj).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self):
        if self.path != "/health":
            return self.reply(404, {"detail": "not found"})
        if os.environ.get("APP_HEALTH") == "never":
            return self.reply(503, {"status": "loading"})
        self.reply(200, {"status": "ok", "device": DEVICE})

    def do_POST(self):
        fields, files = parse_form(self)
        if not os.environ.get("APP_BARRIER"):
            return self.transcribe(fields, files, "")
        n, timeout = int(os.environ["APP_BARRIER"]), float(os.environ.get("APP_BARRIER_TIMEOUT", "30"))
        with INFLIGHT:
            INFLIGHT.now += 1
            INFLIGHT.peak = max(INFLIGHT.peak, INFLIGHT.now)
            INFLIGHT.notify_all()
            INFLIGHT.wait_for(lambda: INFLIGHT.peak >= n, timeout)  # once met, met for all
            peak = INFLIGHT.peak
        try:
            self.transcribe(fields, files, " inflight=%d" % peak)
        finally:
            with INFLIGHT:
                INFLIGHT.now -= 1

    def transcribe(self, fields, files, note):
        state_file("request", str(os.getpid()))
        block = os.path.join(STATE, "block") if STATE else ""
        if block and os.path.exists(block):
            os.remove(block)
            print("blocking this request", flush=True)
            time.sleep(3600)
        if self.path == "/v1/audio/transcriptions":
            audio = files.get("file")
            if audio is None:
                return self.reply(400, {"error": {"message": "no file"}})
            text = "device=%s visible=%s pid=%d bytes=%d model=%s" % (DEVICE, os.environ.get("CUDA_VISIBLE_DEVICES", "-"),
                                                                    os.getpid(), len(audio), fields.get("model", "")) + note
            self.reply(200, {"task": "transcribe", "language": fields.get("language") or "english", "duration": 11.0,
                             "text": text, "segments": [{"id": 0, "start": 0.0, "end": 5.5, "text": text},
                                                        {"id": 1, "start": 5.5, "end": 11.0, "text": "second"}]})
        elif self.path == "/api/v1/asr":
            audio = files.get("files")
            if audio is None:
                return self.reply(422, {"detail": "field files required"})
            text = "device=%s pid=%d bytes=%d lang=%s" % (DEVICE, os.getpid(), len(audio), fields.get("lang", "")) + note
            self.reply(200, {"result": [{"key": fields.get("keys", ""), "text": text, "raw_text": text, "clean_text": text}]})
        else:
            self.reply(404, {"detail": "not found"})


def gpu_alloc(nbytes):
    """Create a CUDA context on SENSEVOICE_DEVICE and allocate nbytes; kept until exit."""
    import ctypes
    cuda = ctypes.CDLL("libcuda.so.1")

    def check(rc, what):
        if rc != 0:
            raise RuntimeError("%s failed: CUresult %d" % (what, rc))

    index = int(DEVICE.split(":")[1]) if DEVICE.startswith("cuda:") else 0
    dev, ctx, ptr = ctypes.c_int(), ctypes.c_void_p(), ctypes.c_uint64()
    check(cuda.cuInit(0), "cuInit")
    check(cuda.cuDeviceGet(ctypes.byref(dev), index), "cuDeviceGet")
    check(cuda.cuCtxCreate_v2(ctypes.byref(ctx), 0, dev), "cuCtxCreate")
    check(cuda.cuMemAlloc_v2(ctypes.byref(ptr), ctypes.c_size_t(nbytes)), "cuMemAlloc")
    print("allocated %d bytes on %s" % (nbytes, DEVICE), flush=True)
    return ctx, ptr


def main():
    print("SenseVoice-shaped test app: device %s, port %d, pid %d" % (DEVICE, PORT, os.getpid()), flush=True)
    if os.environ.get("APP_EXIT"):
        print("fatal: cannot load the model (APP_EXIT)", flush=True)
        sys.exit(int(os.environ["APP_EXIT"]))
    if os.environ.get("APP_WORKER") == "1":
        w = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(3600)"])
        state_file("worker", str(w.pid))
    if os.environ.get("APP_GPU_BYTES"):
        main.gpu = gpu_alloc(int(os.environ["APP_GPU_BYTES"]))
    state_file("pid", str(os.getpid()))
    ThreadingHTTPServer((HOST, PORT), Handler).serve_forever()


if __name__ == "__main__":
    main()
