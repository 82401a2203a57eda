"""Speed of the tiny video-LLM per multimodal RoPE scheme: prefill and per-token decode, with and without KV cache.

For every scheme the registered ``pe_vlm_tiny_{scheme}`` model (random weights, seeded) answers one question about
a clip of ``--frames`` frames at ``--frame-size`` px (tower ``pe_vit_tiny_patch16_rope_mixed_224``, temporal patch 2,
2x2 merge). Measured, median over ``--rounds`` rounds that alternate the schemes (so that load drifts hit all alike):

* ``tower``: vision tower + projector for the clip (``model.embed``), once per clip: the scheme does not touch it;
* ``prefill``: position ids + decoder over the prompt + last-token logits (``generate(max_new_tokens=1)`` on the
  encoded prompt);
* ``decode/token``: per generated token with the KV cache, and without it (a full decoder forward per token);
* ``vs rope1d``: the scheme's prefill over rope1d's on the same tokens, timed right after it (same decoder geometry:
  MHRoPE's tiny model has 8 KV heads, so its reference is rope1d with 8 KV heads); median of the per-round ratios.
  On a loaded machine this ratio is noisy; the next columns isolate what a scheme adds:
* ``ids + tables``: the scheme's position ids for the prompt and its cos/sin tables (the only work that differs
  between schemes; the rotation kernel is shared), and that time beyond rope1d's as a share of rope1d's prefill.

Long sequences (``--long-frames`` temporal patches of 16 x 16 merged tokens, ~32k tokens): position ids
(``model.position_ids`` on the token ids) plus the cos/sin tables (the encoding's ``attn_terms``) against one decoder
layer's forward at that length (causal SDPA), per scheme.

Usage: ``python benchmarks/vlm_speed.py [--frames 8 32] [--rounds 3] [--threads 1]
[--out docs/benchmarks/vlm_speed.md]`` (prints the markdown; ``--out`` also writes it). On a shared CPU, one thread
avoids the oversubscription that otherwise dominates small matmuls.
"""
from __future__ import annotations

import argparse
import os
import platform
import statistics
import time
from typing import Dict, List

import torch

from zoo.encodings import Positions
from zoo.models.vlm import create_video_llm, video_llm_config, vlm_schemes

QUESTION = 'Question: In which direction does the red square move? Options: (A) left (B) right (C) up (D) down'


def _sync(device: torch.device) -> None:
    if device.type == 'cuda':
        torch.cuda.synchronize(device)


def _time(fn, device) -> float:
    _sync(device)
    t0 = time.perf_counter()
    fn()
    _sync(device)
    return time.perf_counter() - t0


def _machine(device: torch.device) -> str:
    cpu = platform.processor() or platform.machine()
    try:
        with open('/proc/cpuinfo') as f:
            names = [line.split(':', 1)[1].strip() for line in f if line.startswith('model name')]
        cpu = names[0] if names else cpu
    except OSError:
        pass
    text = f'{cpu}, {os.cpu_count()} logical cores, torch {torch.__version__}, {torch.get_num_threads()} threads'
    if device.type == 'cuda':
        text += f', GPU {torch.cuda.get_device_name(device)}'
    return text


def _models(schemes: List[str], device: torch.device, frame_size: int) -> Dict[str, object]:
    out = {}
    for s in schemes + ['rope1d@kv8']:
        name, _, variant = s.partition('@')
        kw = dict(num_kv_heads=8) if variant == 'kv8' else {}
        torch.manual_seed(0)
        out[s] = create_video_llm(f'pe_vlm_tiny_{name}', **kw).to(device).eval()
    return out


def _reference(scheme: str) -> str:
    """rope1d with the scheme's decoder geometry: the registered one, or 8 KV heads where the scheme needs them."""
    kv = video_llm_config(f'pe_vlm_tiny_{scheme}')['num_kv_heads']
    return 'rope1d' if kv == video_llm_config('pe_vlm_tiny_rope1d')['num_kv_heads'] else 'rope1d@kv8'


@torch.no_grad()
def clip_table(models, schemes, frames: int, frame_size: int, rounds: int, n_decode: int, device) -> List[str]:
    g = torch.Generator().manual_seed(frames)
    pixels = torch.randint(0, 256, (frames, frame_size, frame_size, 3), dtype=torch.uint8, generator=g)
    prepared = {}
    ref = models['rope1d']  # every model has the same tower and projector weights (same seed, same shapes)
    clip, seg = ref.prepare_video(pixels, timestamps=[i / 2 for i in range(frames)])
    clip = clip.to(device)

    def visual():
        return ref.projector(ref.tower([clip])[0])
    feats = visual()
    tower_s = [_time(visual, device) for _ in range(rounds)]
    for s, m in models.items():
        p = m.prompt([seg, QUESTION])
        b = m.collate([p], 'left')
        ids = b['input_ids'].to(device)
        emb = m.decoder.embed(ids).masked_scatter((ids == m.tokenizer.video_id).unsqueeze(-1), feats)
        common = dict(video_grid_thw=b['video_grid_thw'], second_per_grid_ts=b['second_per_grid_ts'],
                      inputs_embeds=emb, eos_token_id=-1)
        # rope1d on the same tokens (a Qwen3 layout splits the video into frame blocks: one grid row per frame)
        grid = b['video_grid_thw']
        if m.prompt_style == 'qwen3':
            grid = torch.repeat_interleave(grid, grid[:, 0], dim=0)
            grid[:, 0] = 1
        ref_common = dict(common, video_grid_thw=grid, second_per_grid_ts=None)
        prepared[s] = (m, ids, common, models[_reference(s.partition('@')[0])], ref_common)
        m.generate(ids, max_new_tokens=2, **common)  # warm-up
    res = {s: {'prefill': [], 'cached': [], 'full': [], 'ratio': [], 'ids': []} for s in schemes}
    for _ in range(rounds):
        for s in schemes:
            m, ids, common, ref_model, ref_common = prepared[s]

            def ids_tables():  # what the scheme adds to a forward: its ids and its tables
                pos, _ = m.position_ids(ids, None, None, common['video_grid_thw'], common['second_per_grid_ts'],
                                        m.scheme_options)
                return m.decoder.pe.attn_terms(Positions(None, ids=pos, is_causal=True), torch.float32, device)
            res[s]['ids'].append(statistics.median(_time(ids_tables, device) for _ in range(5)))
            pre = _time(lambda: m.generate(ids, max_new_tokens=1, **common), device)
            ref_pre = _time(lambda: ref_model.generate(ids, max_new_tokens=1, **ref_common), device)
            cached = _time(lambda: m.generate(ids, max_new_tokens=1 + n_decode, **common), device)
            full = _time(lambda: m.generate(ids, max_new_tokens=1 + n_decode, use_cache=False, **common), device)
            res[s]['prefill'].append(pre)
            res[s]['ratio'].append(pre / ref_pre)
            res[s]['cached'].append(max(cached - pre, 0.0) / n_decode)
            res[s]['full'].append(max(full - pre, 0.0) / n_decode)
    n_tok = prepared['rope1d'][1].shape[1]
    lines = [f'**{frames} frames** at {frame_size} px: tower + projector {statistics.median(tower_s) * 1e3:.0f} ms '
             f'(scheme-independent); prompt {n_tok} tokens (Qwen2 layout; Qwen3 layout for MRoPE-I / MHRoPE: '
             f'{prepared["mrope_interleave"][1].shape[1] if "mrope_interleave" in prepared else "-"}).', '',
             '| scheme | prefill (ms) | decode/token, cache (ms) | decode/token, no cache (ms) | prefill vs rope1d | '
             'ids + tables (ms) | ids + tables beyond rope1d, % of prefill |', '|---|---|---|---|---|---|---|']
    base = statistics.median(res['rope1d']['ids']) if 'rope1d' in res else 0.0
    base_pre = statistics.median(res['rope1d']['prefill']) if 'rope1d' in res else float('nan')
    for s in schemes:
        r = res[s]
        med = {k: statistics.median(v) for k, v in r.items()}
        lines.append(f'| {s} | {med["prefill"] * 1e3:.1f} | {med["cached"] * 1e3:.1f} | {med["full"] * 1e3:.1f} | '
                     f'{med["ratio"]:.3f} | {med["ids"] * 1e3:.2f} | {100 * (med["ids"] - base) / base_pre:+.1f} |')
    return lines


@torch.no_grad()
def long_table(models, schemes, long_frames: int, rounds: int, long_rounds: int, device) -> List[str]:
    lines = [f'**Long video**: {long_frames} temporal patches x 16 x 16 merged tokens '
             f'({long_frames * 256} video tokens), one decoder layer of the tiny model (width 256, 8 heads, head_dim '
             '32), causal SDPA, batch 1.', '',
             '| scheme | tokens | position ids (ms) | cos/sin tables (ms) | one decoder layer (ms) | '
             '(ids + tables) / layer |', '|---|---|---|---|---|---|']
    for s in schemes:
        m = models[s]
        seg = dict(type='video', grid=(long_frames, 32, 32), second_per_grid_t=1.0)
        p = m.prompt([seg, QUESTION])
        ids = p.input_ids[None].to(device)
        grid, secs = p.video_grid_thw, p.second_per_grid_ts
        pos, _ = m.position_ids(ids, None, None, grid, secs)
        dec = m.decoder
        x = torch.randn(1, ids.shape[1], dec.dim, device=device)

        def tables():
            return dec.pe.attn_terms(Positions(None, ids=pos, is_causal=True), x.dtype, device)
        term = tables()[0]
        blk = dec.blocks[0]
        t_ids, t_tab, t_layer = [], [], []
        for _ in range(rounds):
            t_ids.append(_time(lambda: m.position_ids(ids, None, None, grid, secs), device))
            t_tab.append(_time(tables, device))
        for _ in range(long_rounds):
            t_layer.append(_time(lambda: blk(x, term), device))
        a, b, c = (statistics.median(t) * 1e3 for t in (t_ids, t_tab, t_layer))
        lines.append(f'| {s} | {ids.shape[1]} | {a:.1f} | {b:.1f} | {c:.0f} | {(a + b) / c:.3f} |')
    return lines


def main(argv=None) -> str:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument('--frames', type=int, nargs='+', default=[8, 32], help='clip lengths (frames)')
    ap.add_argument('--frame-size', type=int, default=224, help='frame size in px (a multiple of 32)')
    ap.add_argument('--decode-tokens', type=int, default=8, help='tokens generated after the prefill')
    ap.add_argument('--rounds', type=int, default=3, help='rounds (median)')
    ap.add_argument('--long-frames', type=int, default=128, help='temporal patches of the long video (0: skip)')
    ap.add_argument('--long-rounds', type=int, default=1, help='timings of the (slow) 32k-token decoder layer')
    ap.add_argument('--schemes', nargs='+', default=None, help='schemes (default: all)')
    ap.add_argument('--threads', type=int, default=None, help='torch CPU threads')
    ap.add_argument('--device', default='cpu')
    ap.add_argument('--out', default=None, help='also write the markdown here')
    args = ap.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    device = torch.device(args.device)
    schemes = args.schemes or vlm_schemes()
    if 'rope1d' not in schemes:
        schemes = ['rope1d'] + schemes
    models = _models(schemes, device, args.frame_size)
    cmd = 'python benchmarks/vlm_speed.py ' + ' '.join(argv if argv is not None else __import__('sys').argv[1:])
    lines = [f'Command: `{cmd.strip()}`', '', f'Machine: {_machine(device)} ({device.type}); median of {args.rounds} '
             f'rounds ({args.long_rounds} for the 32k-token layer); system load average at start '
             f'{os.getloadavg()[0]:.1f}.', '']
    for f in args.frames:
        lines += clip_table(models, schemes, f, args.frame_size, args.rounds, args.decode_tokens, device) + ['']
    if args.long_frames:
        lines += long_table(models, schemes, args.long_frames, args.rounds, args.long_rounds, device)
    text = '\n'.join(lines) + '\n'
    print(text)
    if args.out:
        os.makedirs(os.path.dirname(args.out) or '.', exist_ok=True)
        with open(args.out, 'w') as f:
            f.write(text)
    return text


if __name__ == '__main__':
    main()
