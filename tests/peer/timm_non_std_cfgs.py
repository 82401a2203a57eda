"""timm's config test for transformer models, run on zoo's models (copied next to timm's suite by run_timm_suite.sh).

timm's ``test_model_default_cfgs`` checks CNN-style spatial features (``forward_features`` giving ``(B, C, H, W)`` of
``pool_size``); timm sends every transformer (``vit_*``, ``deit*``, ``eva_*``, ... its ``NON_STD_FILTERS``) to
``test_model_default_cfgs_non_std`` instead, choosing by model name. zoo's names (``pe_vit_*``) do not match those
patterns, so this file runs timm's own ``test_model_default_cfgs_non_std``, unmodified, on every model that zoo
registers, and the runner deselects ``test_model_default_cfgs``. Not collected by the project's own pytest run (the
file name does not start with ``test_``).
"""
import pytest
import timm
from timm.models import model_entrypoint

import zoo  # noqa: F401  (registers zoo's models with timm)
from test_models import test_model_default_cfgs_non_std  # timm's suite, copied next to this file

ZOO_MODELS = [n for n in timm.list_models(include_tags=True)
              if model_entrypoint(n.split('.')[0]).__module__.split('.')[0] == 'zoo']


@pytest.mark.parametrize('model_name', ZOO_MODELS)
@pytest.mark.parametrize('batch_size', [1])
def test_zoo_cfgs_non_std(model_name, batch_size):
    test_model_default_cfgs_non_std(model_name, batch_size)
