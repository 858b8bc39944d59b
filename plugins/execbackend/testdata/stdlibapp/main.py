"""A plain standard-library transcription app, as a user would write one.

It trusts Content-Length the way http.server apps do: it reads exactly that
many bytes of body (no chunked decoding; no Content-Length is 411 Length
Required) and parses the multipart form with the email parser. It answers
GET /health and POST /api/v1/asr with SenseVoice api.py's shape, echoing what
it received: {"result": [{"key": KEY, "text": "got N bytes lang=LANG"}]}.
"""
import json
import os
from email.parser import BytesParser
from email.policy import default as default_policy
from http.server import BaseHTTPRequestHandler, HTTPServer

HOST = os.environ.get("SENSEVOICE_HOST", "127.0.0.1")
PORT = int(os.environ.get("SENSEVOICE_PORT", "50000"))


class Handler(BaseHTTPRequestHandler):
    def log_message(self, *args):
        pass

    def answer(self, status, body):
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self):
        self.answer(200 if self.path == "/health" else 404, {"ok": True})

    def do_POST(self):
        length = self.headers.get("Content-Length")
        if length is None:
            self.answer(411, {"detail": "Length Required"})
            return
        body = self.rfile.read(int(length))
        head = "Content-Type: " + self.headers.get("Content-Type", "") + "\r\n\r\n"
        msg = BytesParser(policy=default_policy).parsebytes(head.encode() + body)
        fields, size = {}, -1
        for part in msg.iter_parts():
            name = part.get_param("name", header="content-disposition")
            data = part.get_payload(decode=True)
            if name == "files":
                size = len(data)
            else:
                fields[name] = data.decode()
        text = "got %d bytes lang=%s" % (size, fields.get("lang", ""))
        self.answer(200, {"result": [{"key": fields.get("keys", ""), "text": text}]})


HTTPServer((HOST, PORT), Handler).serve_forever()
