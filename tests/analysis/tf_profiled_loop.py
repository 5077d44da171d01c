"""A small Keras model trained on CPU by a custom loop from a tf.data pipeline (map, batch, prefetch), each step
inside tf.profiler.experimental.Trace("train", step_num=step, _r=1), TensorFlow's own profiler writing LOGDIR.
Usage: python tf_profiled_loop.py LOGDIR [STEPS]"""
import sys

import tensorflow as tf

logdir = sys.argv[1]
steps = int(sys.argv[2]) if len(sys.argv) > 2 else 40
features = tf.random.normal([2048, 32])
labels = tf.random.uniform([2048], maxval=10, dtype=tf.int32)
data = tf.data.Dataset.from_tensor_slices((features, labels)).map(lambda x, y: (tf.nn.relu(x), y))
batches = iter(data.batch(64).prefetch(2).repeat())
model = tf.keras.Sequential([tf.keras.layers.Dense(128, activation="relu"), tf.keras.layers.Dense(10)])
optimizer = tf.keras.optimizers.Adam()
loss_of = tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True)


@tf.function
def train_step(x, y):
    with tf.GradientTape() as tape:
        loss = loss_of(y, model(x, training=True))
    optimizer.apply_gradients(zip(tape.gradient(loss, model.trainable_variables), model.trainable_variables))
    return loss


for _ in range(5):  # traced and warmed before the profile
    train_step(*next(batches))
tf.profiler.experimental.start(logdir)
for step in range(steps):
    with tf.profiler.experimental.Trace("train", step_num=step, _r=1):
        train_step(*next(batches))
tf.profiler.experimental.stop()
