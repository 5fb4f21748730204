"""Print the like-for-like speed table of ``run_speed.sh`` (any Python 3, standard library).

    python summarise_speed.py [results/speed-like-ours]

Training: per round, steady steps/s (first step left out) and CPU seconds per step (first
step left out) of both sides, their ratios (ours / reference for steps/s, reference / ours
for CPU s/step: above 1 = ours faster), parameter counts, load average before -> after.
Forward: per size and round, the minimum wall time of the timed calls and CPU seconds
per call; ratio = reference / ours (above 1 = ours faster). Then the range of each ratio.
"""
import json
import os
import sys


def read(path):
    if not os.path.exists(path):
        return []
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip()]


def pairs(rows, key=lambda r: ()):
    """{(key, round): {side: row}}"""
    out = {}
    for r in rows:
        out.setdefault((key(r), r["round"]), {})[r["side"]] = r
    return out


def load(r):
    return f'{r["load_before"].split()[0]}->{r["load_after"].split()[0]}'


def span(values):
    return f"{min(values):.2f}-{max(values):.2f}x" if values else "-"


def main(folder):
    train = pairs(read(os.path.join(folder, "train.jsonl")))
    if train:
        print("| round | ours steps/s | ref steps/s | ratio | ours CPU s/step | ref CPU s/step | ratio |"
              " params ours / ref | load ours | load ref |")
        print("|---|---|---|---|---|---|---|---|---|---|")
        speed, cpu = [], []
        for (_, rnd), sides in sorted(train.items()):
            if "ours" not in sides or "ref-like-ours" not in sides:
                continue
            o, f = sides["ours"], sides["ref-like-ours"]
            ro, rf = o["result"], f["result"]
            speed.append(ro["steady_steps_per_s"] / rf["steady_steps_per_s"])
            cpu.append(rf["steady_cpu_s_per_step"] / ro["steady_cpu_s_per_step"])
            print(f'| {rnd} | {ro["steady_steps_per_s"]:.2f} | {rf["steady_steps_per_s"]:.2f} | {speed[-1]:.2f}x'
                  f' | {ro["steady_cpu_s_per_step"]:.4f} | {rf["steady_cpu_s_per_step"]:.4f} | {cpu[-1]:.2f}x'
                  f' | {ro["num_params"]:,} / {rf["num_params"]:,} | {load(o)} | {load(f)} |')
        print(f"\ntraining, {len(speed)} pairs ({ro['steps']} steps each): steady steps/s ratio {span(speed)},"
              f" CPU s/step ratio {span(cpu)}\n")
    forward = pairs(read(os.path.join(folder, "forward.jsonl")),
                    key=lambda r: (r["result"]["nc"], r["result"]["nt"], r["result"]["batch"]))
    if forward:
        print("| Nc, Nt, batch | round | ours s (CPU s) | ours XLA s (CPU s) | ref s (CPU s) | ratio wall"
              " | ratio CPU | params ours / ref | load ours | load ref |")
        print("|---|---|---|---|---|---|---|---|---|---|")
        ratios = {}
        for ((nc, nt, b), rnd), sides in sorted(forward.items()):
            if "ours" not in sides or "ref-like-ours" not in sides:
                continue
            o, f, x = sides["ours"], sides["ref-like-ours"], sides.get("ours-xla")
            ro, rf = o["result"], f["result"]
            w = rf["forward_s_min"] / ro["forward_s_min"]
            c = rf["cpu_s_per_call"] / ro["cpu_s_per_call"]
            ratios.setdefault((nc, nt, b), ([], []))[0].append(w)
            ratios[(nc, nt, b)][1].append(c)
            xla = f'{x["result"]["forward_s_min"]:.3f} ({x["result"]["cpu_s_per_call"]:.3f})' if x else "-"
            print(f'| {nc}, {nt}, {b} | {rnd} | {ro["forward_s_min"]:.3f} ({ro["cpu_s_per_call"]:.3f}) | {xla}'
                  f' | {rf["forward_s_min"]:.3f} ({rf["cpu_s_per_call"]:.3f}) | {w:.2f}x | {c:.2f}x'
                  f' | {ro["num_params"]:,} / {rf["num_params"]:,} | {load(o)} | {load(f)} |')
        print()
        for (nc, nt, b), (w, c) in sorted(ratios.items()):
            print(f"forward Nc {nc}, Nt {nt}, batch {b}: {len(w)} pairs, wall ratio {span(w)}, CPU ratio {span(c)}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                                                       "results", "speed-like-ours")))
