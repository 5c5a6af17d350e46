#!/bin/bash
# On a GPU machine (the device tool: carry .gpu, built here by scripts/gpu_site.sh): install what the image lacks, grade
# the samples on CUDA (timed: the throughput figure), run the tests that read those verdicts (GRADER_TESTS_PREGRADED),
# then as much of the rest of the suite as LIMIT seconds allow. Everything lands in $OUT.
T0=$(date +%s); LIMIT=${LIMIT:-470}; RESERVE=${RESERVE:-110}  # seconds kept for the tests after grading
left() { echo $(( LIMIT - ($(date +%s) - T0) )); }
export PYTHONUNBUFFERED=1 GRADER_CACHE_DIR=/opt/zoo
mkdir -p /opt/gsite && tar xJf .gpu/site.txz -C /opt/gsite --strip-components=1 || exit 3
export PYTHONPATH=/opt/gsite:$PWD
{
nvidia-smi -L; nproc; free -g | head -2; echo "checkout: $PWD"
python3 -c "import sys,torch,transformers,bitsandbytes as b; print(sys.version.split()[0], torch.__version__, transformers.__version__, b.__version__, torch.cuda.get_device_name(0))"
python3 -c "from grader.zoo import ModelZoo; ModelZoo().ensure_built()" 2>&1 | tail -2
echo "setup done at $(( $(date +%s)-T0 ))s"
} 2>&1 | tee $OUT/setup.log
N=$(find submissions -name '*.ipynb' | wc -l)
S=$(date +%s)
timeout $(( $(left) - RESERVE )) python3 -m grader submissions/ --seed 20261123 -o /opt/graded -j 15 > $OUT/grade.log 2>&1
RC=$?; E=$(( $(date +%s)-S ))
echo "grade rc=$RC: $N notebooks in ${E}s" | tee -a $OUT/setup.log
tail -c 6000 $OUT/grade.log
# Kernels that cannot start fail every notebook in seconds: stop here rather than spend the minutes left on tests.
if grep -q "kernel did not start" $OUT/grade.log; then grep -v "│" $OUT/grade.log | head -5; exit 4; fi
(cd /opt/graded && find . -name results.json | tar czf $OUT/graded.tgz -T - summary.html grades.csv 2>/dev/null)
export GRADER_TESTS_PREGRADED=/opt/graded
timeout $(( $(left) - 5 )) python3 -m pytest -q -n 14 -p no:cacheprovider --timeout 300 \
  tests/test_samples_latency.py tests/test_samples_perplexity.py tests/test_samples_ptq_bnb.py tests/test_samples_quantization.py \
  -k "not correct_notebook and not variant_loses and not cheat_loses" \
  tests/test_judging.py tests/test_template.py tests/test_overlap.py tests/test_harness.py --junitxml=$OUT/tests1.xml > $OUT/tests1.log 2>&1
echo "tests1 rc=$? at $(( $(date +%s)-T0 ))s"; tail -n 40 $OUT/tests1.log
unset GRADER_TESTS_PREGRADED
R=$(left); if [ "$R" -gt 60 ]; then
timeout $(( R - 15 )) python3 -m pytest -q -n 14 -p no:cacheprovider --timeout 300 tests/ \
  --ignore=tests/test_samples_latency.py --ignore=tests/test_samples_perplexity.py --ignore=tests/test_samples_ptq_bnb.py \
  --ignore=tests/test_samples_quantization.py --ignore=tests/test_cluster.py --ignore=tests/test_dashboard.py \
  --deselect tests/test_judging.py --deselect tests/test_template.py --deselect tests/test_overlap.py \
  --junitxml=$OUT/tests2.xml > $OUT/tests2.log 2>&1
echo "tests2 rc=$? at $(( $(date +%s)-T0 ))s"; tail -n 30 $OUT/tests2.log; fi
