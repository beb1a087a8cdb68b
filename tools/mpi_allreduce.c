/* Open MPI's MPI_Allreduce on its own: the baseline for lazywgpu's
 * all-reduce (examples/allreduce.rs). For each buffer size, the median of
 * ITERS timed calls of MPI_Allreduce(MPI_SUM) on floats, each after a
 * barrier, as rank 0 saw it. Prints "bytes median_us" lines.
 *
 *   mpicc -O2 -o /tmp/mpi_allreduce tools/mpi_allreduce.c
 *   mpirun -np 2 /tmp/mpi_allreduce
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

#define ITERS 50
#define WARMUP 5

static int cmp(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int rank;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    for (long bytes = 4096; bytes <= (64L << 20); bytes *= 4) {
        long n = bytes / 4;
        float *send = malloc(bytes), *recv = malloc(bytes);
        for (long i = 0; i < n; i++) send[i] = (float)(i % 1000) * 0.001f + rank;
        double times[ITERS];
        for (int it = 0; it < WARMUP + ITERS; it++) {
            MPI_Barrier(MPI_COMM_WORLD);
            double t0 = MPI_Wtime();
            MPI_Allreduce(send, recv, (int)n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
            double t = MPI_Wtime() - t0;
            if (it >= WARMUP) times[it - WARMUP] = t;
        }
        qsort(times, ITERS, sizeof(double), cmp);
        if (rank == 0) printf("%ld %.1f\n", bytes, times[ITERS / 2] * 1e6);
        free(send);
        free(recv);
    }
    MPI_Finalize();
    return 0;
}
