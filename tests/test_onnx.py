"""ONNX export of every registered position encoding: the dynamo exporter (``torch.onnx.export(..., dynamo=True)``)
with dynamic height and width, run in onnxruntime, outputs equal to eager within 1e-4.

Parametrised over the encoding registry (each kind at its defaults) plus the options that take other code paths
(ComRoPE-LD, iRPE on q / k / v, ComRoPE-AP with 2 x 2 blocks, LieRE with 4 x 4 blocks). Models are tiny (32 px
images, 8 px patches, width 64, 2 blocks) so that the whole file stays within about a minute per encoding on one
CPU thread. An encoding whose export cannot work is listed in :data:`NOT_EXPORTABLE` with the reason; its test checks
that the export still fails (so that the entry is removed once it works), and ``docs/benchmarks/onnx.md`` gives the
same list.

The table in ``docs/benchmarks/onnx.md`` is written by ``python tests/test_onnx.py --out docs/benchmarks/onnx.md``.
"""
from __future__ import annotations

import argparse
import os
import sys
import time
import warnings

import pytest
import torch
from torch.export import Dim

import zoo  # noqa: F401
from zoo.encodings import list_pos_encodings
from zoo.models.vit import PEVisionTransformer

onnx = pytest.importorskip('onnx', reason='pip install -e .[test] (onnx, onnxscript, onnxruntime)')
ort = pytest.importorskip('onnxruntime', reason='pip install -e .[test] (onnx, onnxscript, onnxruntime)')
pytest.importorskip('onnxscript', reason='pip install -e .[test] (onnx, onnxscript, onnxruntime)')

PATCH = 8
TOL = 1e-4
#: (export size, check sizes) in pixels: the exported graph is run at sizes other than the one it was traced at
EXPORT_SIZE = (32, 40)
CHECK_SIZES = [(32, 40), (48, 24), (16, 56)]

#: every registered kind at its defaults, then the options that take other code paths
CASES = [(kind, {}) for kind in list_pos_encodings()] + [
    ('comrope', dict(variant='ld')),
    ('comrope', dict(variant='ap', block_size=2)),
    ('liere', dict(block_size=4)),
    ('irpe', dict(rpe_on='qk')),
    ('irpe', dict(rpe_on='qkv')),
]

#: kinds whose ONNX export cannot work, with the reason (the test checks that export still fails)
NOT_EXPORTABLE = {}


def case_id(kind: str, kw: dict) -> str:
    return kind + ''.join(f'-{k}={v}' for k, v in kw.items())


def build(kind: str, kw: dict) -> PEVisionTransformer:
    torch.manual_seed(0)
    return PEVisionTransformer(img_size=32, patch_size=PATCH, embed_dim=64, depth=2, num_heads=2, num_classes=5,
                               dynamic_img_size=True, pe=kind, pe_kwargs=dict(kw)).eval()


def _x(h: int, w: int, seed: int = 0) -> torch.Tensor:
    return torch.randn(1, 3, h, w, generator=torch.Generator().manual_seed(seed))


def export_and_compare(model: torch.nn.Module, path: str) -> float:
    """Export ``model`` with dynamic H and W to ``path``, run it in onnxruntime at :data:`CHECK_SIZES` and return the
    largest absolute difference to eager."""
    h, w = Dim('h', min=2, max=16), Dim('w', min=2, max=16)
    with warnings.catch_warnings(), torch.no_grad():
        warnings.simplefilter('ignore')
        program = torch.onnx.export(model, (_x(*EXPORT_SIZE),), dynamo=True, verbose=False,
                                    dynamic_shapes=({2: PATCH * h, 3: PATCH * w},))
    program.save(path)
    session = ort.InferenceSession(path, providers=['CPUExecutionProvider'])
    name = session.get_inputs()[0].name
    err = 0.0
    for i, size in enumerate(CHECK_SIZES):
        x = _x(*size, seed=i + 1)
        with torch.no_grad():
            want = model(x)
        got = torch.from_numpy(session.run(None, {name: x.numpy()})[0])
        assert got.shape == want.shape
        err = max(err, (got - want).abs().max().item())
    return err


@pytest.mark.parametrize('kind, kw', CASES, ids=[case_id(k, kw) for k, kw in CASES])
@pytest.mark.filterwarnings('ignore')
def test_onnx_dynamic_hw_matches_eager(kind, kw, tmp_path):
    model = build(kind, kw)
    key = case_id(kind, kw)
    if key in NOT_EXPORTABLE:
        with pytest.raises(Exception):
            export_and_compare(model, str(tmp_path / 'model.onnx'))
        pytest.skip(f'{key}: {NOT_EXPORTABLE[key]}')
    err = export_and_compare(model, str(tmp_path / 'model.onnx'))
    assert err <= TOL, f'{key}: onnxruntime differs from eager by {err:.2e}'


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description='Export every case, write the status table (markdown).')
    parser.add_argument('--out', help='write the table here')
    parser.add_argument('--cases', nargs='*', help='case ids to run (default: all)')
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    import tempfile
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for kind, kw in CASES:
            key = case_id(kind, kw)
            if args.cases and key not in args.cases:
                continue
            t0 = time.process_time()
            try:
                err = export_and_compare(build(kind, kw), os.path.join(tmp, 'm.onnx'))
                status = 'exports, equal' if err <= TOL else 'exports, differs'
                detail = f'{err:.1e}'
            except Exception as e:  # noqa: BLE001  (the table reports the failure)
                status, detail = 'fails', f'{type(e).__name__}: {str(e).splitlines()[0][:120]}'
            rows.append((key, status, detail, time.process_time() - t0))
            print(rows[-1], file=sys.stderr)
    lines = ['| encoding (options) | ONNX status | max abs error vs eager (3 sizes) | export + check, CPU s |',
             '|---|---|---|---|']
    lines += [f'| `{k}` | {s} | {d if s != "fails" else NOT_EXPORTABLE.get(k, d)} | {t:.0f} |'
              for k, s, d, t in rows]
    table = '\n'.join(lines)
    print(table)
    if args.out:
        with open(args.out + '.tmp', 'w') as f:
            f.write(table + '\n')
        os.replace(args.out + '.tmp', args.out)


if __name__ == '__main__':
    main()
