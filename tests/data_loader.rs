//! The `Dataset` trait and `DataLoader`: batch order and contents, uploads
//! hidden behind the step (timers `data_wait` and `data_load`), errors and
//! panics of a dataset reaching the caller, dropping mid-epoch; CIFAR-10's
//! binary reader on files written here; MNIST through the same trait.

mod common;

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use common::{assert_close, devices};
use lazywgpu::data::augment::{Compose, Normalize};
use lazywgpu::data::{
    Cifar10, DataLoader, Dataset, Example, LOAD_TIMER, Mnist, WAIT_TIMER, shuffled_batches,
};
use lazywgpu::{Device, Error};

/// Example `i` is a `[2, 2, 3]` image of bytes `i + k` (k the pixel's
/// position) labelled `i * 10`; `get` sleeps `delay`, counts its calls,
/// and panics or fails at `bad` (`panic` choosing which).
#[derive(Default)]
struct Synthetic {
    len: usize,
    delay: Duration,
    calls: Arc<AtomicUsize>,
    bad: Option<usize>,
    panic: bool,
}

impl Synthetic {
    fn new(len: usize) -> Synthetic {
        Synthetic {
            len,
            ..Synthetic::default()
        }
    }

    /// The pixels of example `i`, scaled as the loader scales bytes.
    fn pixels(i: usize) -> Vec<f32> {
        (0..12).map(|k| ((i + k) % 256) as f32 / 255.0).collect()
    }
}

impl Dataset for Synthetic {
    fn len(&self) -> usize {
        self.len
    }

    fn get(&self, i: usize) -> lazywgpu::Result<Example> {
        self.calls.fetch_add(1, Ordering::SeqCst);
        std::thread::sleep(self.delay);
        if self.bad == Some(i) {
            if self.panic {
                panic!("example {i} is cursed");
            }
            return Err(Error::Data {
                op: "Synthetic::get",
                message: format!("example {i} is missing"),
            });
        }
        let pixels = (0..12).map(|k| ((i + k) % 256) as u8).collect();
        Ok(Example::u8(pixels, [2, 2, 3], i as i32 * 10))
    }
}

#[test]
fn batches_follow_the_seeded_order_with_their_examples() {
    for dev in devices() {
        for drop_last in [false, true] {
            let loader = DataLoader::new(Synthetic::new(10), 4, &dev)
                .shuffle(5)
                .drop_last(drop_last);
            assert_eq!(loader.len(), if drop_last { 2 } else { 3 });
            for epoch in 0..2 {
                let order = shuffled_batches(10, 4, 5, epoch, drop_last);
                assert_eq!(loader.batch_indices(epoch), order);
                let batches: Vec<_> = loader.epoch(epoch).map(Result::unwrap).collect();
                assert_eq!(batches.len(), order.len());
                for ((images, labels), indices) in batches.iter().zip(&order) {
                    assert_eq!(images.shape(), &[indices.len(), 2, 2, 3]);
                    let want: Vec<i32> = indices.iter().map(|&i| i as i32 * 10).collect();
                    assert_eq!(labels.to_vec::<i32>().unwrap(), want);
                    let pixels: Vec<f32> =
                        indices.iter().flat_map(|&i| Synthetic::pixels(i)).collect();
                    assert_eq!(images.to_vec::<f32>().unwrap(), pixels, "{}", dev.name());
                }
            }
        }
        // Without a seed: in order, the last batch shorter.
        let loader = DataLoader::new(Synthetic::new(5), 2, &dev);
        let labels: Vec<Vec<i32>> = loader
            .epoch(0)
            .map(|b| b.unwrap().1.to_vec::<i32>().unwrap())
            .collect();
        assert_eq!(labels, vec![vec![0, 10], vec![20, 30], vec![40]]);
    }
}

#[test]
fn loading_is_hidden_behind_the_step() {
    for dev in devices() {
        dev.reset_metrics();
        // 4 ms to load a batch (4 examples of 1 ms), 12 ms per step.
        let data = Synthetic {
            delay: Duration::from_millis(1),
            ..Synthetic::new(48)
        };
        let loader = DataLoader::new(data, 4, &dev);
        let step = Duration::from_millis(12);
        let mut batches = loader.epoch(0);
        std::thread::sleep(step); // setting up the model, say
        for batch in &mut batches {
            let (images, _labels) = batch.unwrap();
            let _total = images.sum([0, 1, 2, 3], false); // the step's work...
            std::thread::sleep(step); // ...and its time
            dev.mark_step().unwrap(); // runs it
        }
        let stats = loader.stats();
        let (wait, load) = (stats.wait, stats.load);
        eprintln!(
            "{}: waited {wait:?} for {} batches that took {load:?} to load (hidden {:.3})",
            dev.name(),
            stats.batches,
            stats.hidden_fraction().unwrap()
        );
        assert_eq!(stats.batches, 12);
        assert!(load >= Duration::from_millis(48), "{stats:?}");
        assert!(wait * 5 < load, "the caller waited: {stats:?}");
        let metrics = dev.metrics();
        let (w, l) = (
            metrics.timer(WAIT_TIMER).unwrap(),
            metrics.timer(LOAD_TIMER).unwrap(),
        );
        assert_eq!((w.count, l.count), (12, 12));
        assert_eq!((w.total, l.total), (wait, load));
    }
}

#[test]
fn a_panicking_dataset_is_an_error_at_the_caller() {
    for dev in devices() {
        let data = Synthetic {
            bad: Some(6),
            panic: true,
            ..Synthetic::new(10)
        };
        let loader = DataLoader::new(data, 4, &dev);
        let results: Vec<_> = loader.epoch(0).collect();
        assert_eq!(results.len(), 2, "one batch, then the error, then the end");
        assert!(results[0].is_ok());
        let err = results[1].as_ref().unwrap_err();
        assert!(matches!(err, Error::Data { .. }), "{err}");
        assert!(err.to_string().contains("example 6 is cursed"), "{err}");
    }
}

#[test]
fn dataset_errors_and_mismatched_examples_reach_the_caller() {
    let dev = Device::cpu();
    let data = Synthetic {
        bad: Some(2),
        ..Synthetic::new(4)
    };
    let results: Vec<_> = DataLoader::new(data, 4, &dev).epoch(0).collect();
    assert_eq!(results.len(), 1);
    let err = results[0].as_ref().unwrap_err().to_string();
    assert!(err.contains("example 2 is missing"), "{err}");

    /// Example 1 has another shape; example 3's pixels do not fill it.
    struct Ragged;
    impl Dataset for Ragged {
        fn len(&self) -> usize {
            4
        }
        fn get(&self, i: usize) -> lazywgpu::Result<Example> {
            let shape = if i == 1 { [1, 2, 2] } else { [1, 1, 4] };
            let n = if i == 3 { 3 } else { 4 };
            Ok(Example::f32(vec![0.5; n], shape, 0))
        }
    }
    let mut batches = DataLoader::new(Ragged, 2, &dev).epoch(0);
    let err = batches.next().unwrap().unwrap_err().to_string();
    assert!(
        err.contains("example 1 has shape [1, 2, 2], example 0 of the same batch [1, 1, 4]"),
        "{err}"
    );
    assert!(batches.next().is_none(), "an error ends the epoch");
    let mut batches = DataLoader::new(Ragged, 1, &dev).epoch(0);
    let last = batches.nth(3).unwrap().unwrap_err().to_string();
    assert!(
        last.contains("example 3 has 3 values for its shape [1, 1, 4]"),
        "{last}"
    );
}

#[test]
fn dropping_mid_epoch_stops_the_thread() {
    let dev = Device::cpu();
    let calls = Arc::new(AtomicUsize::new(0));
    let data = Synthetic {
        delay: Duration::from_millis(2),
        calls: calls.clone(),
        ..Synthetic::new(1000)
    };
    let loader = DataLoader::new(data, 10, &dev).prefetch(2);
    let mut batches = loader.epoch(0);
    batches.next().unwrap().unwrap();
    let start = Instant::now();
    drop(batches);
    // The thread is joined: it finished at most the example it was
    // reading, and reads nothing more.
    assert!(start.elapsed() < Duration::from_secs(1));
    let after_drop = calls.load(Ordering::SeqCst);
    std::thread::sleep(Duration::from_millis(50));
    assert_eq!(calls.load(Ordering::SeqCst), after_drop);
    // One batch taken and two ready (the last held by the thread,
    // waiting to hand it over).
    assert!(after_drop <= 30, "{after_drop} examples read");
    // The loader starts over for another epoch.
    assert_eq!(loader.epoch(1).take(2).count(), 2);
}

/// `prefetch(n)` keeps `n` batches ready ahead of the caller, no more:
/// each holds device memory (the loader once held one more than asked).
#[test]
fn a_loader_keeps_as_many_batches_ready_as_it_prefetches() {
    let dev = Device::cpu();
    for ahead in [1usize, 3] {
        let calls = Arc::new(AtomicUsize::new(0));
        let data = Synthetic {
            calls: calls.clone(),
            ..Synthetic::new(1000)
        };
        let loader = DataLoader::new(data, 10, &dev).prefetch(ahead);
        let mut batches = loader.epoch(0);
        batches.next().unwrap().unwrap();
        // The thread fills what it may hold, then waits: the count
        // reaches the taken batch and `ahead` more, and stays there.
        let want = 10 * (1 + ahead);
        let start = Instant::now();
        while calls.load(Ordering::SeqCst) < want && start.elapsed() < Duration::from_secs(10) {
            std::thread::sleep(Duration::from_millis(5));
        }
        std::thread::sleep(Duration::from_millis(200));
        let read = calls.load(Ordering::SeqCst);
        assert_eq!(read, want, "prefetch({ahead}): {read} examples read");
    }
}

/// A fresh directory under the system's temporary one.
fn temp_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("lazywgpu-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// `n` CIFAR records: label `(first + r) % 10`, pixel `k` of record `r`
/// the byte `(first + r + k) % 256`.
fn cifar_records(first: usize, n: usize) -> Vec<u8> {
    let mut bytes = Vec::new();
    for r in first..first + n {
        bytes.push((r % 10) as u8);
        bytes.extend((0..3072).map(|k| ((r + k) % 256) as u8));
    }
    bytes
}

#[test]
fn cifar10_reads_binary_batches() {
    let dir = temp_dir("cifar");
    for i in 1..=5 {
        std::fs::write(
            dir.join(format!("data_batch_{i}.bin")),
            cifar_records(3 * (i - 1), 3),
        )
        .unwrap();
    }
    std::fs::write(dir.join("test_batch.bin"), cifar_records(100, 2)).unwrap();
    let train = Cifar10::load(&dir, true).unwrap();
    let test = Cifar10::load(&dir, false).unwrap();
    assert_eq!((train.len(), test.len()), (15, 2));
    assert_eq!(
        train.labels,
        (0..15).map(|r| (r % 10) as u8).collect::<Vec<_>>()
    );
    let ex = test.get(1).unwrap();
    assert_eq!((ex.shape.as_slice(), ex.label), (&[3, 32, 32][..], 1));
    // Channel-major: red plane first, each row-major.
    assert_eq!(test.image(1)[1024 + 33], ((101 + 1024 + 33) % 256) as u8);

    for dev in devices() {
        let loader = DataLoader::new(train.clone(), 4, &dev).shuffle(1);
        let order = loader.batch_indices(0);
        let (images, labels) = loader.epoch(0).next().unwrap().unwrap();
        assert_eq!(images.shape(), &[4, 3, 32, 32]);
        let want: Vec<f32> = order[0]
            .iter()
            .flat_map(|&i| train.image(i).iter().map(|&p| p as f32 / 255.0))
            .collect();
        assert_eq!(images.to_vec::<f32>().unwrap(), want, "{}", dev.name());
        let want: Vec<i32> = order[0].iter().map(|&i| (i % 10) as i32).collect();
        assert_eq!(labels.to_vec::<i32>().unwrap(), want);
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn cifar10_errors_name_the_file_and_the_records() {
    let dir = temp_dir("cifar-bad");
    let path = dir.join("test_batch.bin");
    let mut bytes = cifar_records(0, 3);
    bytes.truncate(2 * 3073 + 100);
    std::fs::write(&path, &bytes).unwrap();
    let err = Cifar10::load(&dir, false).unwrap_err();
    assert!(matches!(err, Error::Format { .. }), "{err}");
    let text = err.to_string();
    assert!(text.contains(&path.display().to_string()), "{text}");
    assert!(
        text.contains("truncated: 6246 bytes are 2 whole records of 3073 bytes"),
        "{text}"
    );
    assert!(text.contains("and 100 bytes of another"), "{text}");

    let mut bytes = cifar_records(0, 3);
    bytes[2 * 3073] = 12;
    std::fs::write(&path, &bytes).unwrap();
    let text = Cifar10::load(&dir, false).unwrap_err().to_string();
    assert!(text.contains("record 2 of 3 has label 12"), "{text}");

    std::fs::write(&path, []).unwrap();
    let text = Cifar10::load(&dir, false).unwrap_err().to_string();
    assert!(text.contains("holds no records"), "{text}");

    // The training files are missing.
    let err = Cifar10::load(&dir, true).unwrap_err();
    assert!(matches!(err, Error::Io { .. }), "{err}");
    assert!(err.to_string().contains("data_batch_1.bin"), "{err}");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn mnist_through_the_dataset_trait() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/data/mnist-10k");
    let test = Mnist::load_split(&dir, false).unwrap();
    let all = common::mnist();
    assert_eq!(test.len(), all.test_labels.shape[0]);
    assert_eq!(all.split(false).labels.data, test.labels.data);
    let example = test.get(3).unwrap();
    assert_eq!(
        (example.shape.as_slice(), example.label),
        (&[1, 28, 28][..], all.test_labels.data[3] as i32)
    );
    for dev in devices() {
        let loader = DataLoader::new(test.clone(), 8, &dev).shuffle(3);
        let order = loader.batch_indices(0);
        let normalize = Compose::new(0).then(Normalize {
            mean: vec![0.1307],
            std: vec![0.3081],
        });
        let (images, labels) = loader.epoch(0).next().unwrap().unwrap();
        let images = normalize.apply(&images, 0).unwrap();
        // The same as the host-normalised batches of `Mnist::batch_at`.
        let (want_x, want_y) =
            Mnist::batch_at(&all.test_images, &all.test_labels, &order[0], &dev).unwrap();
        assert_eq!(images.shape(), want_x.shape());
        assert_close(
            &images.to_vec::<f32>().unwrap(),
            &want_x.to_vec::<f32>().unwrap(),
            1e-5,
            1e-5,
            &dev.name(),
        );
        assert_eq!(
            labels.to_vec::<i32>().unwrap(),
            want_y.to_vec::<i32>().unwrap()
        );
    }
}
