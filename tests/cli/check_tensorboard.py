"""check_tensorboard.py: reads a run's TensorBoard event files with TensorBoard's own
reader (the PyPI tensorboard package) and compares them with the run's metrics.jsonl.
Prints one "PASS name" or "FAIL name: why" line per check (tests/run.sh counts them) and
exits 1 when any failed. Used by tests/cli/test_tensorboard.sh.

  check_tensorboard.py values RUN_DIR NAME [FILES]
      EventAccumulator over RUN_DIR/tb (what `tensorboard --logdir` runs): every scalar
      of every metrics.jsonl row at its step with the row's value as float32, the eval
      scores (summary.json's eval_start at step 0), no point that metrics.jsonl lacks,
      the resolved recipe as a text summary at step 0; FILES: the number of event files.
  check_tensorboard.py structure RUN_DIR NAME START...
      each file opens with file_version "brain.Event:2"; the first has no SessionLog, and
      file k + 1 has a SessionLog START right after it, at step START[k] (the first step
      it trains); file k holds no train/loss point at or after START[k] (cut back).
  check_tensorboard.py corrupt FILE NAME
      a copy with one data byte flipped, and one with a length byte flipped: TensorBoard's
      record reader raises DataLossError naming the failed CRC check, and its event file
      loader stops before the damaged record.
  check_tensorboard.py whole FILE NAME [MAX_STEP]
      every record of FILE passes TensorBoard's CRC checks (after a failed append was cut
      back) and its last train/loss step is MAX_STEP.
"""
import glob
import logging
import json
import math
import os
import shutil
import struct
import sys

from tensorboard.backend.event_processing import event_accumulator, event_file_loader
from tensorboard.compat import tf
from tensorboard.compat.proto import event_pb2

failures = 0
# the accumulator logs its purge of the points a resumed file replaces; the checks assert it
logging.getLogger("tensorboard").setLevel(logging.ERROR)

# metrics.jsonl key -> tag, as trainer.train.tensorboard writes them (the Hugging Face
# Trainer's names where it has one)
ROW_TAGS = {
    "loss": "train/loss", "lr": "train/learning_rate", "grad_norm": "train/grad_norm",
    "epoch": "train/epoch", "tokens_per_s": "train/tokens_per_s", "loss_scale": "train/loss_scale",
    "allreduce_s": "train/allreduce_s", "mem_allocated": "memory/allocated_bytes",
    "mem_reserved": "memory/reserved_bytes", "mem_peak": "memory/peak_allocated_bytes",
}
MEM_TAGS = ("weights", "grads", "optimizer", "activations", "workspace")


def check(name, ok, why=""):
    global failures
    if ok:
        print("PASS " + name)
    else:
        failures += 1
        print("FAIL %s: %s" % (name, why))
    sys.stdout.flush()


def f32(x):
    return struct.unpack("<f", struct.pack("<f", x))[0]


def same(a, b):
    return (math.isnan(a) and math.isnan(b)) or a == b


def event_files(run):
    return sorted(glob.glob(os.path.join(run, "tb", "events.out.tfevents.*")))


def expected_points(run):
    """{tag: {step: value}} from metrics.jsonl and summary.json."""
    want = {}
    with open(os.path.join(run, "metrics.jsonl")) as f:
        rows = [json.loads(line) for line in f if line.strip()]
    for row in rows:
        step = row["step"]
        for key, tag in ROW_TAGS.items():
            if isinstance(row.get(key), (int, float)):
                want.setdefault(tag, {})[step] = row[key]
        for kind, field in (("current_bytes", "mem_by_tag"), ("peak_bytes", "mem_peak_by_tag")):
            for mt in MEM_TAGS:
                if mt in row.get(field, {}):
                    want.setdefault("memory/%s/%s" % (mt, kind), {})[step] = row[field][mt]
        for k, v in (row.get("eval") or {}).items():
            want.setdefault("eval/" + k, {})[step] = v
    with open(os.path.join(run, "summary.json")) as f:
        summary = json.load(f)
    for k, v in (summary.get("eval_start") or {}).items():
        want.setdefault("eval/" + k, {})[0] = v
    return rows, want


def values(run, name, nfiles):
    files = event_files(run)
    if nfiles is not None:
        check(name + "_files", len(files) == nfiles, "%d event files, expected %d: %s" % (len(files), nfiles, files))
    rows, want = expected_points(run)
    check(name + "_metrics_rows", len(rows) > 0, "metrics.jsonl is empty")
    acc = event_accumulator.EventAccumulator(os.path.join(run, "tb"), size_guidance={"scalars": 0, "tensors": 0})
    acc.Reload()
    tags = acc.Tags()
    have = set(tags["scalars"])
    missing = sorted(set(want) - have)
    check(name + "_every_tag", not missing, "tags missing from the event files: %s" % missing)
    extra = sorted(have - set(want))
    check(name + "_no_other_tag", not extra, "tags that metrics.jsonl has no value for: %s" % extra)
    for tag in ("train/loss", "train/learning_rate", "train/grad_norm", "train/tokens_per_s",
                "memory/weights/current_bytes", "memory/activations/peak_bytes", "eval/spearman"):
        check(name + "_has_" + tag.replace("/", "_"), tag in want and tag in have, "no %s" % tag)
    bad = []
    for tag in sorted(set(want) & have):
        got = {}
        for ev in acc.Scalars(tag):
            if ev.step in got:
                bad.append("%s: step %d twice" % (tag, ev.step))
            got[ev.step] = ev.value
        if sorted(got) != sorted(want[tag]):
            bad.append("%s: steps %s, metrics.jsonl has %s" % (tag, sorted(got), sorted(want[tag])))
            continue
        for step, v in want[tag].items():
            if not same(got[step], f32(v)):
                bad.append("%s step %d: %r, metrics.jsonl %r" % (tag, step, got[step], v))
    check(name + "_values_equal_metrics", not bad, "; ".join(bad[:8]))
    steps = sorted(e.step for e in acc.Scalars("train/loss")) if "train/loss" in have else []
    want_steps = [r["step"] for r in rows]
    check(name + "_unbroken_curve", steps == want_steps, "train/loss steps %s, metrics.jsonl %s" % (steps, want_steps))
    text_ok, why = False, "no text summary tagged recipe"
    if "recipe" in tags["tensors"]:
        evs = acc.Tensors("recipe")
        first = min(evs, key=lambda e: e.step)
        body = first.tensor_proto.string_val[0].decode() if first.tensor_proto.string_val else ""
        md = acc.SummaryMetadata("recipe")
        text_ok = (first.step == 0 and md.plugin_data.plugin_name == "text"
                   and first.tensor_proto.dtype == 7 and "The fully resolved recipe" in body)
        why = "step %d, plugin %r, dtype %d, text %r" % (first.step, md.plugin_data.plugin_name,
                                                         first.tensor_proto.dtype, body[:80])
    check(name + "_recipe_text_at_step_0", text_ok, why)


def events_of(path):
    return [event_pb2.Event.FromString(r) for r in event_file_loader.RawEventFileLoader(path).Load()]


def structure(run, name, starts_want):
    files = event_files(run)
    bad = []
    if len(files) != len(starts_want) + 1:
        bad.append("%d event files, expected %d" % (len(files), len(starts_want) + 1))
    for i, path in enumerate(files):
        evs = events_of(path)
        if not evs or evs[0].file_version != "brain.Event:2":
            bad.append("%s does not open with file_version brain.Event:2" % path)
            continue
        starts = [e for e in evs if e.HasField("session_log")]
        if i > 0:
            if not starts or starts[0].session_log.status != event_pb2.SessionLog.START or evs[1] is not starts[0]:
                bad.append("%s: no SessionLog START after file_version" % os.path.basename(path))
            elif i <= len(starts_want) and starts[0].step != starts_want[i - 1]:
                bad.append("%s: START at step %d, expected %d" % (os.path.basename(path), starts[0].step,
                                                                 starts_want[i - 1]))
        elif starts:
            bad.append("the first file has a SessionLog")
        steps = [e.step for e in evs if e.HasField("summary") and any(v.tag == "train/loss" for v in e.summary.value)]
        if i < len(starts_want) and steps and max(steps) != starts_want[i] - 1:
            bad.append("%s: train/loss up to step %d, the next file starts at %d" % (os.path.basename(path),
                                                                                    max(steps), starts_want[i]))
    check(name, len(files) > 0 and not bad, "; ".join(bad) or "no event files")


def read_raw(path):
    """All records through TensorBoard's record reader, raising what it raises."""
    it = event_file_loader._make_tf_record_iterator(path)
    return [rec for rec in it]


def corrupt(path, name):
    whole = read_raw(path)
    n_whole = len(list(event_file_loader.EventFileLoader(path).Load()))
    with open(path, "rb") as f:
        data = bytearray(f.read())
    # the offsets of the records: 8 length + 4 + n + 4 each
    offs, pos = [], 0
    while pos < len(data):
        n = struct.unpack("<Q", bytes(data[pos:pos + 8]))[0]
        offs.append((pos, n))
        pos += 16 + n
    check(name + "_layout", pos == len(data) and len(offs) == len(whole) and len(offs) >= 3,
          "%d records by their length fields, the reader found %d" % (len(offs), len(whole)))
    k = len(offs) // 2
    for what, byte_at, msg in (("data", offs[k][0] + 12 + offs[k][1] // 2, "failed event crc32 check"),
                               ("length", offs[k][0] + 1, "failed header crc32 check")):
        bad = bytearray(data)
        bad[byte_at] ^= 0x01
        copy = path + ".damaged"
        with open(copy, "wb") as f:
            f.write(bad)
        try:
            read_raw(copy)
            check(name + "_" + what + "_crc_detected", False, "the reader read the damaged file without an error")
        except tf.errors.DataLossError as e:
            check(name + "_" + what + "_crc_detected", msg in str(e), "DataLossError %r, expected %r" % (str(e), msg))
        loaded = len(list(event_file_loader.EventFileLoader(copy).Load()))
        check(name + "_" + what + "_loader_stops", loaded == k and n_whole == len(offs),
              "the loader read %d of %d events, expected the %d before the damaged one" % (loaded, n_whole, k))
        os.remove(copy)


def whole(path, name, max_step=None):
    try:
        recs = read_raw(path)
    except tf.errors.DataLossError as e:
        check(name + "_crc_ok", False, str(e))
        return
    check(name + "_crc_ok", len(recs) > 0, "no records")
    steps = [e.step for e in map(event_pb2.Event.FromString, recs)
             if e.HasField("summary") and any(v.tag == "train/loss" for v in e.summary.value)]
    check(name + "_last_step", steps and (max_step is None or max(steps) == max_step),
          "train/loss steps %s, expected up to %s" % (steps, max_step))


def main(argv):
    try:
        run(argv)
    except Exception as e:  # a crash of a check is its failure, with a line tests/run.sh counts
        check("%s_%s" % (argv[1], argv[3] if len(argv) > 3 else "check"), False, "%s: %s" % (type(e).__name__, e))
    return 1 if failures else 0


def run(argv):
    cmd = argv[1]
    if cmd == "values":
        values(argv[2], argv[3], int(argv[4]) if len(argv) > 4 else None)
    elif cmd == "structure":
        structure(argv[2], argv[3], [int(a) for a in argv[4:]])
    elif cmd == "corrupt":
        corrupt(argv[2], argv[3])
    elif cmd == "whole":
        whole(argv[2], argv[3], int(argv[4]) if len(argv) > 4 else None)
    else:
        raise ValueError("unknown command " + cmd)


if __name__ == "__main__":
    sys.exit(main(sys.argv))
