"""Image tables larger than memory, measured: the same photos as a Parquet file (its image
column copied once into an Arrow file in tapefit's cache, read memory-mapped), as a Hugging Face
dataset folder (`save_to_disk`, read memory-mapped) and as PNG files listed in a CSV (the
baseline: only the names in memory).

    python experiments/image_table_benchmark.py                  # 3,000 photos of 128x128
    python experiments/image_table_benchmark.py --images 6000    # twice as many

Each variant runs in a fresh process of its own, in turn, `--repeats` times: it loads the table
with `tapefit.data.image_tables.image_table` (no validation table: 10 % held out) and reads one
pass over the training split in batches of 64, decoded and resized to 64x64. Every process
starts with an empty cache folder (`TAPEFIT_CACHE_DIR`), so the Parquet variant's loading
includes its copy. Reported: the process's peak RSS (VmHWM; it counts the pages of mapped
files the pass touched, which the kernel can drop), its anonymous memory after the pass
(RssAnon: what it cannot drop), the RSS the loading itself added,
the loading's seconds, and the images a second the pass decoded, medians over the repeats,
each as a ratio against the CSV of files. The Parquet and dataset variants import pyarrow and
`datasets`, which the CSV does not.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

DRIVER = """
import json, sys, time
import tapefit
from experiments.image_table_benchmark import measure
print("RESULT " + json.dumps(measure(sys.argv[1], sys.argv[2])))
"""
VARIANTS = {  # name -> (table, image column) under the benchmark's folder
    "PNG files listed in a CSV": ("files.csv", "file"),
    "Parquet (Arrow copy, memory-mapped)": ("photos.parquet", "image"),
    "dataset folder (memory-mapped)": ("photos_dataset", "image"),
}
BASELINE = "PNG files listed in a CSV"


def status_mb(field: str) -> float:
    """A memory figure of this process from /proc/self/status (`VmRSS`, `VmHWM`), in MB."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(f"{field}:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def rss_mb() -> float:
    """This process's resident memory now, in MB."""
    return status_mb("VmRSS")


def peak_rss_mb() -> float:
    """This process's peak resident memory, in MB (VmHWM: since its exec, unlike `wait4`'s
    figure, which starts from its parent's at the fork)."""
    return status_mb("VmHWM")


def measure(table: str, column: str) -> dict[str, float]:
    """Load `table` and read one training pass: the RSS loading added, images a second."""
    import time

    from tapefit.data.image_tables import image_table

    before, started = rss_mb(), time.perf_counter()
    data = image_table(table, image_column=column, image_size=(64, 64), batch_size=64,
                       val_fraction=0.1)  # fmt: skip
    loaded, loading_s = rss_mb() - before, time.perf_counter() - started
    started, images = time.perf_counter(), 0
    for batch, _ in data.train:
        images += int(batch.shape[0])
    seconds = time.perf_counter() - started
    return {
        "peak_rss_mb": peak_rss_mb(),
        "anonymous_mb": status_mb("RssAnon"),  # what is not a file's pages, after the pass
        "loading_rss_mb": loaded,
        "loading_s": loading_s,
        "images_per_s": images / seconds,
    }


def write_photos(folder: Path, count: int, size: int) -> None:
    """`count` noisy `size`x`size` PNG photos of three classes: files with a CSV listing them,
    the same images as bytes in a Parquet file and in a dataset folder."""
    import datasets
    import numpy as np
    import tensorflow as tf

    rng = np.random.default_rng(0)
    (folder / "photos").mkdir(parents=True)
    rows = []
    for index in range(count):
        pixels = rng.integers(0, 256, (size, size, 3)).astype("uint8")
        name = f"photos/{index}.png"
        (folder / name).write_bytes(tf.io.encode_png(pixels).numpy())
        rows.append((name, "abc"[index % 3]))
    (folder / "files.csv").write_text("file,label\n" + "".join(f"{n},{k}\n" for n, k in rows))
    features = datasets.Features({"image": datasets.Image(), "label": datasets.Value("string")})
    images = [{"bytes": (folder / name).read_bytes(), "path": None} for name, _ in rows]
    table = datasets.Dataset.from_dict(
        {"image": images, "label": [k for _, k in rows]}, features=features
    )
    table.to_parquet(str(folder / "photos.parquet"))
    table.save_to_disk(str(folder / "photos_dataset"))


def measured(folder: Path, table: str, column: str, cache: Path) -> dict[str, float]:
    """`measure` in a fresh process, its cache folder `cache` (empty)."""
    env = dict(os.environ, TAPEFIT_CACHE_DIR=str(cache))
    env["PYTHONPATH"] = os.pathsep.join([str(Path(__file__).parents[1]), env.get("PYTHONPATH", "")])
    finished = subprocess.run(
        [sys.executable, "-c", DRIVER, str(folder / table), column],
        env=env,
        capture_output=True,
        text=True,
    )
    if finished.returncode != 0:
        last = (finished.stderr.strip().splitlines() or ["no output"])[-1]
        raise SystemExit(f"measuring {table} failed ({finished.returncode}): {last}")
    return json.loads(finished.stdout.split("RESULT ", 1)[1])


def main(argv: list[str] | None = None) -> dict[str, dict[str, float]]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--images", type=int, default=3000)
    parser.add_argument("--size", type=int, default=128, help="each photo's side, pixels")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--json", help="also write the medians here")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="tapefit-image-table-bench-") as temporary:
        folder = Path(temporary)
        write_photos(folder, args.images, args.size)
        size = sum(p.stat().st_size for p in (folder / "photos").iterdir()) / 1e6
        print(f"{args.images} photos of {args.size}x{args.size}, {size:.0f} MB of PNG", flush=True)
        results: dict[str, list[dict[str, float]]] = {name: [] for name in VARIANTS}
        for repeat in range(args.repeats):
            for name, (table, column) in VARIANTS.items():
                cache = folder / "cache" / f"{table}-{repeat}"
                results[name].append(measured(folder, table, column, cache))
                print(f"{name}, repeat {repeat + 1}: {results[name][-1]}", flush=True)
    medians = {
        name: {key: statistics.median(r[key] for r in rows) for key in rows[0]}
        for name, rows in results.items()
    }
    base = medians[BASELINE]
    print(f"\nmedians over {args.repeats} repeats (ratios against '{BASELINE}'):")
    print(
        "| table | peak RSS, MB | vs files | anonymous after the pass, MB | vs files | "
        "loading added, MB | loading, s | images/s | vs files |"
    )
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for name, m in medians.items():
        print(
            f"| {name} | {m['peak_rss_mb']:.0f} | {m['peak_rss_mb'] / base['peak_rss_mb']:.2f} | "
            f"{m['anonymous_mb']:.0f} | {m['anonymous_mb'] / base['anonymous_mb']:.2f} | "
            f"{m['loading_rss_mb']:.0f} | {m['loading_s']:.2f} | {m['images_per_s']:.0f} | "
            f"{m['images_per_s'] / base['images_per_s']:.2f} |"
        )
    if args.json:
        Path(args.json).write_text(json.dumps({"photos_mb": size, "medians": medians}, indent=1))
    return medians


if __name__ == "__main__":
    main()
