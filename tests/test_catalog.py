"""``zoo list`` (``zoo.models.catalog``) lists every zoo model, the video-LLMs included (issue 18)."""
from __future__ import annotations

import timm
import torch

import zoo
from zoo.cli import main
from zoo.models.catalog import list_pe_names, model_catalog
from zoo.models.vlm import vlm_schemes


def _count(model: torch.nn.Module) -> int:
    return sum(p.numel() for p in model.parameters())


def test_zoo_list_shows_the_video_llms(capsys):
    assert main(['list', 'pe_vlm*']) == 0
    lines = capsys.readouterr().out.splitlines()
    assert [line.split()[0] for line in lines[1:]] == zoo.list_video_llms()
    assert all(line.split()[1] in vlm_schemes() and line.rstrip().endswith('-') for line in lines[1:])


def test_video_llm_rows():
    rows = model_catalog('pe_vlm_tiny_*')
    assert [r['name'] for r in rows] == zoo.list_video_llms('pe_vlm_tiny_*')
    for r in rows:
        assert r['pe'] == r['name'][len('pe_vlm_tiny_'):] and r['family'] == 'Multimodal RoPE'
        assert r['pretrained'] == [] and r['params'] > 0
    with torch.device('meta'):
        mhrope = zoo.create_video_llm('pe_vlm_tiny_mhrope')  # 8 KV heads: more parameters than the other tiny ones
    assert next(r['params'] for r in rows if r['pe'] == 'mhrope') == _count(mhrope)


def test_scheme_names_match_like_pe_names():
    assert [r['name'] for r in model_catalog('mrope')] == ['pe_vlm_small_mrope', 'pe_vlm_tiny_mrope']
    assert {'mrope', 'videorope', 'rope_mixed'} <= set(list_pe_names())


def test_rows_are_sorted_and_counts_need_no_init():
    rows = model_catalog(['pe_vit_tiny_patch16_peg_224', 'pe_vlm_small_hope', 'clip_pe_vit_tiny_patch16_ape_224'])
    assert [r['name'] for r in rows] == ['clip_pe_vit_tiny_patch16_ape_224', 'pe_vit_tiny_patch16_peg_224',
                                         'pe_vlm_small_hope']
    with torch.device('meta'):
        peg = timm.create_model('pe_vit_tiny_patch16_peg_224')  # initialised: the catalog skips that, same count
    assert rows[1]['params'] == _count(peg) and rows[1]['pe'] == 'peg' and rows[1]['family'].startswith('CPE')


def test_pe_part_of_a_model_name_is_a_pe_name():
    """``zoo list comrope_ap`` finds the models whose name carries that PE (their encoding is ``comrope``)."""
    names = {r['name'] for r in model_catalog('comrope_ap')}
    assert 'pe_vit_small_patch16_comrope_ap_224' in names and not any('comrope_ld' in n for n in names)
    assert {r['name'] for r in model_catalog('irpe_qkv')} >= {'pe_vit_small_patch16_irpe_qkv_224'}
