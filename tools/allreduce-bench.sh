#!/usr/bin/env bash
# All-reduce between two local ranks: Open MPI's MPI_Allreduce alone
# (tools/mpi_allreduce.c) against lazywgpu's ProcessGroup on host data and
# on device tensors (examples/allreduce.rs), same buffer sizes, same run.
# Prints a markdown table: median microseconds per call and the algorithm
# bandwidth (bytes / time).
set -euo pipefail
cd "$(dirname "$0")/.."
ranks=${RANKS:-2}
export OMPI_MCA_btl_vader_single_copy_mechanism=${OMPI_MCA_btl_vader_single_copy_mechanism:-none}
mpi=(mpirun --allow-run-as-root --oversubscribe --bind-to none -np "$ranks")
mpicc -O2 -o target/mpi_allreduce tools/mpi_allreduce.c
cargo build --release --quiet --features mpi --example allreduce
"${mpi[@]}" target/mpi_allreduce > target/allreduce-mpi.txt
"${mpi[@]}" target/release/examples/allreduce > target/allreduce-lazywgpu.txt
grep '^# ' target/allreduce-lazywgpu.txt | head -1
echo
echo "| bytes | MPI_Allreduce µs | GB/s | lazywgpu host µs | GB/s | ratio | lazywgpu tensor µs | GB/s |"
echo "| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"
join <(sort -k1,1 target/allreduce-mpi.txt) <(grep -v '^#' target/allreduce-lazywgpu.txt | sort -k1,1) |
    sort -n -k1,1 |
    awk '{ printf "| %d | %.1f | %.2f | %.1f | %.2f | %.2f | %.1f | %.2f |\n",
           $1, $2, $1 / $2 / 1e3, $3, $1 / $3 / 1e3, $3 / $2, $4, $1 / $4 / 1e3 }'
