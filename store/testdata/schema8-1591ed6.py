#!/usr/bin/env python3
"""Makes store/testdata/schema8-1591ed6.db(.gz) and schema8-1591ed6.sent.json.

The fixture is a real schema 8 file, written by handoff built from commit
1591ed6 (the last one whose events kept their body inside their record,
compacted and HTML-escaped, with text_at measured on the body as received):

    git worktree add /tmp/h1591 1591ed6 && (cd /tmp/h1591 && go build -o /tmp/handoff-1591ed6 .)
    python3 store/testdata/schema8-1591ed6.py /tmp/handoff-1591ed6

It runs that binary's zero-config demo on a temporary data folder, POSTs
real-shaped bodies to /hooks/demo in several layouts, stops it and copies
handoff.db here, gzipped. sent.json lists every event: its key, the body
sent (exact bytes), the text, and what migration 8 should make of it
("as_sent": reads back as sent; "unreadable": kept, marked unreadable).
"""
import gzip, json, os, shutil, signal, subprocess, sys, tempfile, time, urllib.request

binary = sys.argv[1]
here = os.path.dirname(os.path.abspath(__file__))
port = 18931

long2000 = ("The order came cold & late; the driver said <nothing>. " * 40)[:1999] + "!"  # the demo trims a text
texts = [
    ("fish", "Hi, I ordered the fish & chips for delivery tonight but it never came, can you check?"),
    ("html", "<b>Bold</b> claims: a > b and c < d, and \"quotes\" with a back\\slash, all in one long message here."),
    ("emoji", "Table for 4 on Friday at 8? 🎉🍕👨‍👩‍👧‍👦 We'd love the window seat if possible, thanks so much!"),
    ("arabic", "مرحبا، أود حجز طاولة لأربعة أشخاص يوم الجمعة الساعة الثامنة مساءً من فضلك، شكرا جزيلا"),
    ("hebrew", "שלום, אני רוצה להזמין שולחן לארבעה אנשים ביום שישי בשמונה בערב, תודה רבה לכם"),
    ("accents", "Cafe\u0301 cre\u0300me bru\u0302le\u0301e & the nin\u0303o's pin\u0303a colada — combining accents, long enough."),
    ("long", long2000),
    ("short", "hi & bye"),
    ("newlines", "First line of a long message\nsecond line & third\r\nfourth line, long enough to be a reference"),
    ("plain", "A plain ASCII text without any of the characters json escapes, long enough for a place."),
]
layouts = {
    "compact": lambda o: json.dumps(o, ensure_ascii=False, separators=(",", ":")),
    "spaced": lambda o: json.dumps(o, ensure_ascii=False),
    "indented": lambda o: json.dumps(o, ensure_ascii=False, indent=2),
    "crlf": lambda o: "\r\n" + json.dumps(o, ensure_ascii=False, indent=2).replace("\n", "\r\n") + "\r\n",
    "ascii": lambda o: json.dumps(o),  # \u escapes
}

sent = []
n = 0
for layout, enc in layouts.items():
    for name, text in texts:
        n += 1
        o = {"id": f"{layout}-{name}", "from": f"+1555000{n:04d}", "name": "Ada", "text": text}
        sent.append({"key": "demo:" + o["id"], "text": text, "body": enc(o), "expect": "as_sent"})
# Two strings under "text" as long as each other: migration 8 cannot tell
# which one was the text, so the event is kept and marked unreadable.
t1 = "Nested text one & it is long enough to be kept as a place in the body, yes."
t2 = "Nested text two & it is long enough to be kept as a place in the body, yes."
o = {"id": "ambiguous", "from": "+15550009999", "name": "Bo", "text": t1, "quoted": {"text": t2}}
sent.append({"key": "demo:ambiguous", "text": t1, "body": json.dumps(o, ensure_ascii=False, indent=2), "expect": "unreadable"})

data = tempfile.mkdtemp()
env = dict(os.environ, HANDOFF_ADMIN_PASSWORD="fixture-password-1591", HANDOFF_API_TOKEN="f" * 40)
proc = subprocess.Popen([binary, "serve", "--data", data, "--addr", f"127.0.0.1:{port}"], env=env,
                        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
try:
    deadline = time.time() + 30
    while True:
        try:
            urllib.request.urlopen(f"http://127.0.0.1:{port}/readyz", timeout=1)
            break
        except Exception:
            if time.time() > deadline:
                raise
            time.sleep(0.1)
    for s in sent:
        req = urllib.request.Request(f"http://127.0.0.1:{port}/hooks/demo", data=s["body"].encode(),
                                     headers={"content-type": "application/json"})
        with urllib.request.urlopen(req, timeout=10) as r:
            assert r.status == 202, (s["key"], r.status)
finally:
    proc.send_signal(signal.SIGTERM)
    proc.wait(timeout=30)

raw = open(os.path.join(data, "handoff.db"), "rb").read()
with open(os.path.join(here, "schema8-1591ed6.db.gz"), "wb") as f:
    f.write(gzip.compress(raw, mtime=0))
with open(os.path.join(here, "schema8-1591ed6.sent.json"), "w") as f:
    json.dump(sent, f, ensure_ascii=False, indent=1)
    f.write("\n")
shutil.rmtree(data)
print(f"{len(sent)} events, {len(raw)} bytes")
