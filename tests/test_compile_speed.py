"""benchmarks/compile_speed.py (issue 24): the default covers every registered image model's encoding, each built at
the benchmark's geometry, and a row reports the median and the spread of its runs."""
import argparse
import importlib.util
import os

import timm
import torch

import zoo  # noqa: F401  (registers the models with timm)

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _module():
    spec = importlib.util.spec_from_file_location('compile_speed_under_test',
                                                  os.path.join(ROOT, 'benchmarks', 'compile_speed.py'))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_default_pes_are_every_registered_image_model():
    cs = _module()
    pes = cs.image_pes()
    for name in timm.list_models('pe_vit_*_patch16_*_224'):
        assert name.split('_patch16_')[1][:-len('_224')] in pes, name
    assert {'irpe_qkv', 'comrope_ld', 'peg0to5', 'liere'} <= set(pes)


def test_build_uses_the_entrypoint_at_the_benchmark_geometry():
    cs = _module()
    args = argparse.Namespace(model_size='tiny', size=224)
    assert not timm.is_model('pe_vit_tiny_patch16_irpe_qkv_224')  # only ViT-S/B entrypoints: another size's is used
    model = cs.build('irpe_qkv', args)
    assert model.pe.rpe_on == 'qkv' and model.embed_dim == 192 and model.blocks[0].attn.num_heads == 3
    assert cs.build('comrope_ld', args).pe.variant == 'ld'
    assert cs.build('comrope:variant=ld,block_size=4', args).pe.block_size == 4


def test_measure_reports_median_and_spread_of_runs(monkeypatch):
    cs = _module()
    monkeypatch.setattr(torch, 'compile', lambda model: model)  # the protocol, not inductor
    args = argparse.Namespace(model_size='tiny', size=32, batch_size=1, runs=3, repeats=1, warmup=0, clock='cpu')
    row = cs.measure('ape', args)
    assert len(row['ratio_runs']) == 3 and min(row['ratio_runs']) <= row['ratio'] <= max(row['ratio_runs'])
    assert row['max_abs_diff'] == 0.0
