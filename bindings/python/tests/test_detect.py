"""GPU detection through the library, and device pools declared from it."""

import os
import stat

import pytest

import cronoq


@pytest.fixture
def no_gpu_env(monkeypatch):
    for var in ("CRONOQ_NUM_GPUS", "CUDA_VISIBLE_DEVICES", "CRONOQ_NVIDIA_SMI"):
        monkeypatch.delenv(var, raising=False)
    return monkeypatch


def fake_nvidia_smi(tmp_path, output):
    script = tmp_path / "nvidia-smi"
    script.write_text("#!/bin/sh\ncat <<'END'\n%sEND\n" % output)
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    return str(script)


def test_cronoq_num_gpus_is_an_explicit_count(no_gpu_env):
    no_gpu_env.setenv("CRONOQ_NUM_GPUS", "3")
    found = cronoq.detect_gpus()
    assert found == cronoq.GpuList(ids=("0", "1", "2"), source="CRONOQ_NUM_GPUS")


def test_cuda_visible_devices_gives_the_ids(no_gpu_env):
    no_gpu_env.setenv("CUDA_VISIBLE_DEVICES", "GPU-x, 3")
    found = cronoq.detect_gpus()
    assert found.ids == ("GPU-x", "3") and found.source == "CUDA_VISIBLE_DEVICES"


def test_nvidia_smi_output_gives_the_uuids(no_gpu_env, tmp_path):
    smi = fake_nvidia_smi(tmp_path, "GPU 0: NVIDIA H200 (UUID: GPU-aaaa)\n"
                                    "GPU 1: NVIDIA H200 (UUID: GPU-bbbb)\n")
    found = cronoq.detect_gpus(nvidia_smi=smi, timeout=30)
    assert found.ids == ("GPU-aaaa", "GPU-bbbb") and found.source == "nvidia-smi"
    pool = cronoq.Pool("gpu=auto", nvidia_smi=smi, detect_timeout=30)
    with pool.acquire({"gpu": 2}) as g:
        assert g.cuda_visible() == "GPU-aaaa,GPU-bbbb"
    pool = cronoq.Pool(devices={"gpu": "auto"}, nvidia_smi=smi)
    assert pool.resource("gpu").devices == 2


def test_a_machine_without_nvidia_smi_has_no_gpus(no_gpu_env, tmp_path):
    found = cronoq.detect_gpus(nvidia_smi=str(tmp_path / "missing"))
    assert found.ids == ()
    pool = cronoq.Pool(devices={"gpu": "auto"}, nvidia_smi=str(tmp_path / "missing"))
    with pytest.raises(cronoq.NeverFits):
        pool.try_acquire({"gpu": 0.5})


def test_an_unparsable_variable_is_a_parse_error_naming_it(no_gpu_env):
    no_gpu_env.setenv("CRONOQ_NUM_GPUS", "many")
    with pytest.raises(cronoq.ParseError) as e:
        cronoq.detect_gpus()
    assert "CRONOQ_NUM_GPUS" in str(e.value)


@pytest.mark.optional
@pytest.mark.skipif(not os.environ.get("CRONOQ_REAL_GPUS"),
                    reason="CRONOQ_REAL_GPUS (the GPU count of this machine) is not set")
def test_real_gpus_are_found_by_nvidia_smi(no_gpu_env):
    found = cronoq.detect_gpus()
    assert found.source == "nvidia-smi"
    assert len(found.ids) == int(os.environ["CRONOQ_REAL_GPUS"])
    assert all(i.startswith("GPU-") for i in found.ids)
    pool = cronoq.Pool("gpu=auto")
    with pool.acquire({"gpu": 0.5}) as g:
        assert g.cuda_visible() in found.ids
