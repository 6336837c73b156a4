"""Kind `data`: malformed data files. A bad line sits after good ones, so the message must name
the file and the right line (`train.libsvm:3`), not just the file."""
import json
import os
import subprocess

from . import Case, Expect, error, key_re, place_re, success, tiny_args

GOOD_SVM = ["1 1:0.5 3:1", "0 2:1 4:0.25"]
GOOD_FFM = ["1 0:1:0.5 1:3:1", "0 0:2:1 1:4:0.25"]
TAIL_SVM = ["1 1:1 4:1", "0 3:1 2:0.5"]


def wide(cid, files, extra=(), expect=None, prepare=None) -> Case:
    data = next(iter(files))
    return Case(f"data:wide_train:{cid}", "data", "wide_train",
                tiny_args("wide_train", drop=("data.train",)) + [f"--data.train={{dir}}/{data}"] + list(extra),
                expect, files=files, prepare=prepare)


def svm(*lines: str) -> str:
    return "\n".join(lines) + "\n"


# Bad third lines of a libsvm file (label, index, value, bytes): each must stop at train.libsvm:3.
SVM_LINES = {
    "label_nan": "nan 1:1", "label_inf": "inf 1:1", "label_2": "2 1:1", "label_half": "0.5 1:1",
    "label_word": "abc 1:1", "label_minus_2": "-2 1:1", "label_overflow": "1e400 1:1", "label_missing": "1:1 2:1",
    "index_negative": "1 -1:1", "index_2p32_minus_1": "1 4294967295:1", "index_overflow": "1 99999999999999999999:1",
    "index_word": "1 abc:1", "index_missing": "1 :1", "value_missing": "1 3:", "no_colon": "1 3",
    "double_colon": "1 3::1", "three_parts": "1 3:1:2", "index_hex": "1 0x10:1", "value_nan": "1 3:nan",
    "value_inf": "1 3:inf", "value_minus_inf": "1 3:-inf", "value_overflow": "1 3:1e40", "value_word": "1 3:abc",
    "value_decimal_comma": "1 3:1,5", "nul_byte": "1 3:1\x00 4:1", "index_fraction": "1 3.5:1",
}
FFM_LINES = {"field_above_65535": "1 70000:1:1", "field_negative": "1 -1:1:1", "two_parts": "1 1:1",
             "field_word": "1 a:1:1", "value_nan": "1 1:1:nan"}


def wide_cases(env) -> list:
    out = [wide(f"libsvm_{k}", {"train.libsvm": svm(*GOOD_SVM, v, *TAIL_SVM)}, expect=error(place_re("train.libsvm", 3)))
           for k, v in SVM_LINES.items()]
    out += [wide(f"libffm_{k}", {"train.libffm": svm(*GOOD_FFM, v)}, expect=error(place_re("train.libffm", 3)))
            for k, v in FFM_LINES.items()]
    name = place_re("train.libsvm")
    out += [
        wide("libsvm_empty_file", {"train.libsvm": ""}, expect=error(name)),
        wide("libsvm_only_comments", {"train.libsvm": "# a\n# b\n"}, expect=error(name)),
        wide("libsvm_only_blank_lines", {"train.libsvm": "\n  \n\t\n"}, expect=error(name)),
        wide("libsvm_all_bad_skipped", {"train.libsvm": svm("x", "y")}, ["--data.skip_bad_lines=true"], error(name)),
        wide("libsvm_label_only_line", {"train.libsvm": svm(*GOOD_SVM, "1", *TAIL_SVM)}, expect=success()),
        wide("libsvm_crlf", {"train.libsvm": "\r\n".join(GOOD_SVM + TAIL_SVM) + "\r\n"}, expect=success()),
        wide("libsvm_no_final_newline", {"train.libsvm": "\n".join(GOOD_SVM + TAIL_SVM)}, expect=success()),
        wide("libsvm_as_libffm", {"train.libsvm": svm(*GOOD_SVM)}, ["--data.format=libffm"],
             error(place_re("train.libsvm", 1))),
        wide("features_below_max_index", {"train.libsvm": svm(*GOOD_SVM, *TAIL_SVM)}, ["--model.features=3"],
             error(key_re("model.features"))),
        wide("valid_bad_line", {"train.libsvm": svm(*GOOD_SVM), "valid.libsvm": svm(*GOOD_SVM, "1 3:nan")},
             ["--data.valid={dir}/valid.libsvm"], error(place_re("valid.libsvm", 3))),
        wide("valid_missing", {"train.libsvm": svm(*GOOD_SVM)}, ["--data.valid={dir}/nothere.libsvm"],
             error(place_re("nothere.libsvm"))),
        wide("valid_unseen_feature", {"train.libsvm": svm(*GOOD_SVM), "valid.libsvm": svm("1 1:1 900:1")},
             ["--data.valid={dir}/valid.libsvm"], Expect(error=[place_re("valid.libsvm")], success=[])),
        wide("train_directory", {"sub/x": ""}, expect=error(place_re("sub"))),
        Case("data:wide_train:predict_data_bad_line", "data", "wide_train",
             ["--predict", "--predict.model={dir}/model.safetensors", "--predict.data={dir}/p.libsvm"],
             error(place_re("p.libsvm", 2)), files={"p.libsvm": svm("1 1:1", "1 1:abc")},
             prepare=lambda d: env.copy_shared("wide_model/model.safetensors", d / "model.safetensors"),
             needs=("wide_model",)),
    ]
    # The binary cache beside a text file (data.cache): written by a first run, then damaged.
    for cid, damage in (("cache_truncated", lambda b: b[: len(b) // 2]),
                        ("cache_value_byte_flipped", lambda b: b[:-3] + bytes([b[-3] ^ 0x40]) + b[-2:]),
                        ("cache_rows_huge", lambda b: b[:40] + (2**40).to_bytes(8, "little") + b[48:])):
        out.append(wide(cid, {"train.libsvm": svm(*GOOD_SVM, *TAIL_SVM)}, prepare=cache_damager(env, damage),
                        expect=Expect(error=[place_re("train.libsvm.skewbin")],
                                      success=[place_re("train.libsvm.skewbin")])))
    # A pipe with a writer (as <(zcat f.gz) gives): read as it comes without the cache, refused
    # with a clear word with it (a pipe has no size or mtime to key it on, and is read once).
    for cid, cache, expect in (("fifo_cache_off", "false", success(r"training rows on rank 0 \(4 lines")),
                               ("fifo_cache_on", "true", error(place_re("rows.fifo"), key_re("data.cache")))):
        out.append(Case(f"data:wide_train:{cid}", "data", "wide_train",
                        tiny_args("wide_train", drop=("data.train",)) +
                        ["--data.train={dir}/rows.fifo", f"--data.cache={cache}"], expect,
                        prepare=fifo_writer("rows.fifo", svm(*GOOD_SVM, *GOOD_SVM))))
    # The text edited with its size and mtime kept (sed -i, then touch -d): the cache is stale.
    out.append(wide("cache_source_edited_size_and_mtime_kept", {"train.libsvm": svm(*GOOD_SVM, *TAIL_SVM)},
                    prepare=cache_damager(env, bytes, edit_source=True),
                    expect=success(r"training rows on rank 0 \(\d+ lines, 0 skipped")))
    return out


def fifo_writer(name, text):
    """A named pipe `name` that a writer (its own process, ended within 30 s) fills with `text`."""
    def prepare(d):
        os.mkfifo(d / name)
        (d / "fifo.txt").write_text(text)
        subprocess.Popen(["timeout", "30", "sh", "-c", f"cat fifo.txt > {name}"], cwd=d,
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return prepare


def cache_damager(env, damage, edit_source=False):
    def prepare(d):
        subprocess.run([env.exe("wide_train")] + tiny_args("wide_train", drop=("data.train",)) +
                       [f"--data.train={d}/train.libsvm"], capture_output=True, check=True, timeout=60, cwd=d)
        cache = d / "train.libsvm.skewbin"
        cache.write_bytes(damage(cache.read_bytes()))
        if edit_source:  # the first label flipped, by a new file renamed over it (as sed -i does)
            source = d / "train.libsvm"
            stat, text = source.stat(), source.read_bytes()
            edited = d / "edited.tmp"
            edited.write_bytes(bytes([ord("0") + ord("1") - text[0]]) + text[1:])
            edited.rename(source)
            os.utime(source, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    return prepare


CSV_GOOD = ["0,0.1,0.2,0.3", "1,0.3,0.2,0.1", "2,0.5,0.5,0.5", "3,0.9,0.1,0.4"]
CSV_LINES = {"label_negative": "-1,0.1,0.2,0.3", "label_word": "abc,0.1,0.2,0.3", "label_fraction": "1.5,0.1,0.2,0.3",
             "label_70000": "70000,0.1,0.2,0.3",
             "label_10": "10,0.1,0.2,0.3", "label_200": "200,0.1,0.2,0.3", "label_overflow": "99999999999999999999,0.1,0.2,0.3",
             "feature_nan": "1,nan,0.2,0.3", "feature_inf": "1,inf,0.2,0.3", "feature_overflow": "1,1e400,0.2,0.3",
             "row_short": "1,0.1,0.2", "row_long": "1,0.1,0.2,0.3,0.4", "feature_trailing_text": "1,0.1x,0.2,0.3",
             "feature_empty": "1,,0.2,0.3", "trailing_comma": "1,0.1,0.2,0.3,", "semicolons": "1;0.1;0.2;0.3"}


def mnist(cid, train, test=None, expect=None, extra=()) -> Case:
    files = {} if train is None else {"train.csv": train}
    if test is not None:
        files["test.csv"] = test
    return Case(f"data:preduce_train:{cid}", "data", "preduce_train",
                tiny_args("preduce_train") + ["--data.source=mnist", "--data.mnist_dir={dir}"] + list(extra),
                expect, files=files)


def hetero(cid, text, expect) -> Case:
    return Case(f"data:preduce_train:hetero_trace_{cid}", "data", "preduce_train",
                tiny_args("preduce_train") + ["--hetero.trace={dir}/delays.txt"], expect, files={"delays.txt": text})


def preduce_cases() -> list:
    good = svm(*CSV_GOOD)
    out = [mnist(f"mnist_{k}", svm(CSV_GOOD[0], v, *CSV_GOOD[1:]), good, error(place_re("train.csv", 2)))
           for k, v in CSV_LINES.items()]
    out += [
        mnist("mnist_header_line", svm("label,x1,x2,x3", *CSV_GOOD), good, error(place_re("train.csv", 1))),
        mnist("mnist_empty_train", "", good, error(place_re("train.csv"))),
        mnist("mnist_missing_test", good, None, error(place_re("test.csv"))),
        mnist("mnist_test_other_width", good, svm("0,0.1,0.2"), error(place_re("test.csv", 1))),
        mnist("mnist_test_label_10", good, svm("0,0.1,0.2,0.3", "10,0.1,0.2,0.3"), error(place_re("test.csv", 2))),
        mnist("mnist_missing_train", None, good, error(place_re("train.csv"), "scripts/fetch_data.sh")),
        mnist("mnist_crlf", "\r\n".join(CSV_GOOD) + "\r\n", good, success()),
        hetero("word", "1,2\n3,abc\n", error(place_re("delays.txt", 2))),
        hetero("negative", "1,2\n3,-2\n", error(place_re("delays.txt", 2))),
        hetero("nan", "1,2\n3,nan\n", error(place_re("delays.txt", 2))),
        hetero("overflow", "1,2\n3,1e400\n", error(place_re("delays.txt", 2))),
        hetero("inf", "0,1\n0,inf\n", error(place_re("delays.txt", 2))),
        hetero("1e300", "0,1\n0,1e300\n", error(place_re("delays.txt", 2))),
        hetero("trailing_junk", "0,1\n1,2x\n", error(place_re("delays.txt", 2))),
        hetero("one_value_for_two_workers", "1,2\n3\n", error(place_re("delays.txt", 2))),
        hetero("empty", "", error(place_re("delays.txt"))),
        Case("data:preduce_train:hetero_trace_missing", "data", "preduce_train",
             tiny_args("preduce_train") + ["--hetero.trace={dir}/nothere.txt"], error(place_re("nothere.txt"))),
    ]
    return out


def moe(cid, files, args, expect, prepare=None, needs=()) -> Case:
    return Case(f"data:moe_train:{cid}", "data", "moe_train", tiny_args("moe_train") + args, expect,
                files=files, prepare=prepare, needs=needs)


def recorded_trace(env, edit):
    """Records tr.rank0 with the tiny settings (moe.top_k=1), then rewrites its bytes with `edit`."""
    def prepare(d):
        subprocess.run([env.exe("moe_train")] + tiny_args("moe_train") + [f"--moe.save_trace={d}/tr"],
                       capture_output=True, check=True, timeout=60, cwd=d)
        t = d / "tr.rank0"
        t.write_bytes(edit(t.read_bytes()))
    return prepare


def moe_cases(env) -> list:
    text = "The quick brown fox jumps over the lazy dog. " * 40
    return [
        moe("train_empty", {"corpus.txt": ""}, ["--data.train={dir}/corpus.txt"], error(place_re("corpus.txt"))),
        moe("train_shorter_than_seq_len", {"corpus.txt": "tiny text"}, ["--data.train={dir}/corpus.txt"],
            error(place_re("corpus.txt"), key_re("model.seq_len"))),
        moe("train_directory", {"sub/x": ""}, ["--data.train={dir}/sub"], error(place_re("sub"))),
        moe("train_binary_bytes", {"corpus.bin": bytes(range(256)) * 8}, ["--data.train={dir}/corpus.bin"], success()),
        moe("valid_shorter_than_seq_len", {"corpus.txt": text, "valid.txt": "short"},
            ["--data.train={dir}/corpus.txt", "--data.valid={dir}/valid.txt"], error(place_re("valid.txt"))),
        moe("valid_missing", {"corpus.txt": text}, ["--data.train={dir}/corpus.txt", "--data.valid={dir}/nothere.txt"],
            error(place_re("nothere.txt"))),
        moe("replay_trace_garbage", {"tr.rank0": "hello\x00world\n"}, ["--moe.replay_trace={dir}/tr"],
            error(place_re("tr.rank0"))),
        moe("replay_trace_missing", {}, ["--moe.replay_trace={dir}/tr"], error(place_re("tr.rank0"))),
        moe("replay_trace_truncated", {}, ["--moe.replay_trace={dir}/tr"], error(place_re("tr.rank0")),
            prepare=recorded_trace(env, lambda b: b[: len(b) // 2 + 1])),
        moe("replay_trace_other_top_k", {}, ["--moe.replay_trace={dir}/tr", "--moe.top_k=2"],
            error(place_re("tr.rank0"), r"moe\.top_k = 1", r"moe\.top_k = 2"), prepare=recorded_trace(env, bytes)),
        moe("replay_trace_other_batch", {}, ["--moe.replay_trace={dir}/tr", "--train.batch_size=3"],
            error(place_re("tr.rank0"), r"train\.batch_size = 2", r"train\.batch_size = 3"),
            prepare=recorded_trace(env, bytes)),
        moe("replay_trace_headerless", {}, ["--moe.replay_trace={dir}/tr"], error(place_re("tr.rank0"), "header"),
            prepare=recorded_trace(env, lambda b: b[b.index(b"\n") + 1:])),
    ]


def trace_line(counts) -> str:
    return json.dumps({"iteration": 0, "tokens_per_expert": counts})


GOOD_COUNTS = [[10, 20, 30, 40], [5, 5, 5, 5]]
TRACE_LINES = {  # replaces line 2 of a three-line trace for 4 GPUs
    "not_json": "{not json", "negative_count": trace_line([[10, -20, 30, 40], [5, 5, 5, 5]]),
    "fractional_count": trace_line([[10, 2.5, 30, 40], [5, 5, 5, 5]]),
    "count_1e300": trace_line([[10, 1e300, 30, 40], [5, 5, 5, 5]]),
    "string_count": trace_line([[10, "20", 30, 40], [5, 5, 5, 5]]),
    "null_count": trace_line([[10, None, 30, 40], [5, 5, 5, 5]]),
    "ragged_layers": trace_line([[10, 20, 30, 40], [5, 5]]),
    "fewer_layers": trace_line([[10, 20, 30, 40]]), "more_experts": trace_line([[1] * 8, [1] * 8]),
    "empty_array": trace_line([]), "too_deep": trace_line([[[1, 2, 3, 4]], [[1, 2, 3, 4]]]),
    "trailing_text": trace_line(GOOD_COUNTS) + " x", "counts_not_array": trace_line("lots"),
}


def sim(cid, text, expect, extra=()) -> Case:
    return Case(f"data:placement_sim:{cid}", "data", "placement_sim",
                tiny_args("placement_sim") + ["--sim.trace={dir}/trace.jsonl"] + list(extra), expect,
                files={"trace.jsonl": text})


def sim_cases() -> list:
    good = trace_line(GOOD_COUNTS)
    out = [sim(f"trace_{k}", svm(good, v, good), error(place_re("trace.jsonl", 2))) for k, v in TRACE_LINES.items()]
    out += [
        sim("trace_empty", "", error(place_re("trace.jsonl"))),
        sim("trace_key_absent", svm(good, good), error(place_re("trace.jsonl"), r"bogus"), ["--sim.trace_key=bogus"]),
        sim("trace_experts_not_multiple_of_gpus", svm(*[trace_line([[1] * 6, [1] * 6])] * 2),
            error(place_re("trace.jsonl"), key_re("sim.gpus"))),
        sim("trace_count_int64_max", svm(good, trace_line([[10, 2**63 - 1, 30, 40], [5, 5, 5, 5]]), good),
            Expect(error=[place_re("trace.jsonl", 2)], success=[])),
        sim("trace_good_replayed", svm(good, good, good), success(r'"iterations":3')),
        Case("data:placement_sim:validate_garbage", "data", "placement_sim",
             tiny_args("placement_sim") + ["--sim.validate={dir}/run.jsonl"], error(place_re("run.jsonl", 1)),
             files={"run.jsonl": "{garbage\n"}),
        # Lines that parse but lack the fields: the whole file is unusable, so its name is enough.
        Case("data:placement_sim:validate_missing_fields", "data", "placement_sim",
             tiny_args("placement_sim") + ["--sim.validate={dir}/run.jsonl"], error(place_re("run.jsonl")),
             files={"run.jsonl": svm('{"iteration": 1}', '{"iteration": 2}')}),
    ]
    return out


def cases(env) -> list:
    return wide_cases(env) + preduce_cases() + moe_cases(env) + sim_cases()
