//! One histogram series of our own: classic and native buckets with the exemplars
//! of the series beside them, readable under one lock so that a fast `/metrics` encoder can
//! write the counts straight out ([`ProbeHistogram::read`]).
//!
//! Why not prometheus-client's `Histogram`: in 0.26 its counts are private and readable only
//! through its own encoders, which allocate a snapshot per series per scrape (BENCHMARKS §11).
//!
//! Behaviour is that of prometheus-client 0.26's `Histogram` built as `Histogram::new(bounds)`
//! (no native buckets) or `Histogram::new_classic_and_native(bounds,
//! NativeHistogramConfig::new(factor))`, observation for observation:
//!
//! - **Classic buckets**: the configured bounds (non-finite ones dropped) and an implicit
//!   `+Inf`; a value goes to the first bucket whose bound is at or above it, NaN to `+Inf`.
//!   With no bounds there is still the lone `+Inf` bucket (what `--metrics.histograms native`
//!   exports today: the text formats need a bucket to encode a histogram).
//! - **Native buckets** (Prometheus' exponential histograms, the schema from the bucket
//!   factor as [`ProbeHistogram::schema_for_factor`]): zero threshold 2^-128
//!   ([`ZERO_THRESHOLD`]), values with `|v|` at or below it in the zero bucket, others in the
//!   bucket of `|v|` on the side of `v`'s sign (`-0.0` is in the zero bucket, `±Inf` in the
//!   bucket after the one of `f64::MAX`); NaN is counted (count, sum, classic `+Inf`) but in no
//!   native bucket. The bucket index uses client_golang's bound table, bit for bit
//!   ([`SCHEMA_8_BOUNDS`]), as the library does.
//! - **No bucket limit**: the library's default configuration has `max_buckets` 0
//!   (unbounded), no reset and no zero-bucket widening, and ours never sets them, so the
//!   resolution-reduction, widening and reset logic of the library is not here: the schema
//!   and zero threshold never change after [`ProbeHistogram::new`].
//! - **Exemplars**: at most one per slot of the family's classic bounds (kept also when only
//!   native buckets are exported), the newest observation of a slot wins
//!   ([`super::exemplars`] writes them into the expositions).
//!
//! Once a value's native bucket exists, observing it allocates nothing: one lock, a linear
//! scan of the classic bounds, a binary search for the native bucket.

use std::collections::HashMap;
use std::iter::once;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::SystemTime;

use prometheus_client::encoding::{
    EncodeMetric, MetricEncoder, NativeHistogram, NativeHistogramBuckets, NoLabelSet,
};
use prometheus_client::metrics::exemplar::Exemplar as LibraryExemplar;
use prometheus_client::metrics::{MetricType, TypedMetric};

use super::exemplars::Exemplar;

/// The coarsest native schema Prometheus knows (each bucket 2^16 times the one before).
pub const SCHEMA_MIN: i8 = -4;
/// The finest native schema Prometheus knows (each bucket 2^(1/256) times the one before).
pub const SCHEMA_MAX: i8 = 8;

/// The native zero bucket's threshold: 2^-128 (≈ 2.9e-39), the library's and the Prometheus
/// specification's default. Values with `|v|` at or below it count in the zero bucket.
pub const ZERO_THRESHOLD: f64 = f64::from_bits((1023 - 128) << 52);

/// The native buckets' bounds within one power of two at schema 8: `SCHEMA_8_BOUNDS[k]` is
/// 2^(k/256)/2, the upper bound of sub-bucket `k - 1` of the octave `[0.5, 1)` (a schema `s`
/// between 1 and 8 uses every 2^(8-s)-th entry). These are client_golang's values
/// (`nativeHistogramBounds` in prometheus/histogram.go), which prometheus-client 0.26 uses too;
/// they are up to 4 ULP below the correctly rounded 2^(k/256)/2, and a value exactly at a bound
/// lands in a different bucket if the bound differs by one ULP, so they are kept bit for bit
/// rather than computed (`tests::every_native_bound_lands_where_the_library_puts_it` checks
/// every bound of every schema against the library).
#[rustfmt::skip]
pub const SCHEMA_8_BOUNDS: [f64; 256] = [
    0.5, 0.5013556375251013, 0.5027149505564014, 0.5040779490592088,
    0.5054446430258502, 0.5068150424757447, 0.5081891574554764, 0.509566998038869,
    0.5109485743270583, 0.5123338964485679, 0.5137229745593818, 0.5151158188430205,
    0.5165124395106142, 0.5179128468009786, 0.5193170509806894, 0.520725062344158,
    0.5221368912137069, 0.5235525479396449, 0.5249720429003435, 0.526395386502313,
    0.5278225891802786, 0.5292536613972564, 0.5306886136446309, 0.5321274564422321,
    0.5335702003384117, 0.5350168559101208, 0.5364674337629877, 0.5379219445313954,
    0.5393803988785598, 0.5408428074966075, 0.5423091811066545, 0.5437795304588847,
    0.5452538663326288, 0.5467321995364429, 0.5482145409081883, 0.549700901315111,
    0.5511912916539204, 0.5526857228508706, 0.5541842058618393, 0.5556867516724088,
    0.5571933712979462, 0.5587040757836845, 0.5602188762048033, 0.5617377836665098,
    0.5632608093041209, 0.564787964283144, 0.5663192597993595, 0.5678547070789026,
    0.5693943173783458, 0.5709381019847808, 0.572486072215902, 0.5740382394200894,
    0.5755946149764913, 0.5771552102951081, 0.5787200368168754, 0.5802891060137493,
    0.5818624293887887, 0.5834400184762408, 0.585021884841625, 0.5866080400818185,
    0.5881984958251406, 0.5897932637314379, 0.5913923554921704, 0.5929957828304968,
    0.5946035575013605, 0.5962156912915756, 0.5978321960199137, 0.5994530835371903,
    0.6010783657263515, 0.6027080545025619, 0.6043421618132907, 0.6059806996384005,
    0.6076236799902344, 0.6092711149137041, 0.6109230164863786, 0.6125793968185725,
    0.6142402680534349, 0.6159056423670379, 0.6175755319684665, 0.6192499490999082,
    0.620928906036742, 0.622612415087629, 0.6243004885946023, 0.6259931389331581,
    0.6276903785123455, 0.6293922197748583, 0.6310986751971253, 0.6328097572894031,
    0.6345254785958666, 0.6362458516947014, 0.637970889198196, 0.6397006037528346,
    0.6414350080393891, 0.6431741147730128, 0.6449179367033329, 0.6466664866145447,
    0.6484197773255048, 0.6501778216898253, 0.6519406325959679, 0.6537082229673385,
    0.6554806057623822, 0.6572577939746774, 0.659039800633032, 0.6608266388015788,
    0.6626183215798706, 0.6644148621029772, 0.6662162735415805, 0.6680225691020727,
    0.6698337620266515, 0.6716498655934177, 0.6734708931164728, 0.6752968579460171,
    0.6771277734684463, 0.6789636531064505, 0.6808045103191123, 0.6826503586020058,
    0.6845012114872953, 0.6863570825438342, 0.688217985377265, 0.690083933630119,
    0.6919549409819159, 0.6938310211492645, 0.6957121878859629, 0.6975984549830999,
    0.6994898362691555, 0.7013863456101023, 0.7032879969095076, 0.7051948041086352,
    0.7071067811865475, 0.7090239421602076, 0.7109463010845827, 0.7128738720527471,
    0.7148066691959849, 0.7167447066838943, 0.718687998724491, 0.7206365595643126,
    0.7225904034885232, 0.7245495448210174, 0.7265139979245261, 0.7284837772007218,
    0.7304588970903234, 0.7324393720732029, 0.7344252166684908, 0.7364164454346837,
    0.7384130729697496, 0.7404151139112358, 0.7424225829363761, 0.7444354947621984,
    0.7464538641456323, 0.7484777058836176, 0.7505070348132126, 0.7525418658117031,
    0.7545822137967112, 0.7566280937263048, 0.7586795205991071, 0.7607365094544071,
    0.762799075372269, 0.7648672334736434, 0.7669409989204777, 0.7690203869158282,
    0.7711054127039704, 0.7731960915705107, 0.7752924388424999, 0.7773944698885442,
    0.7795022001189185, 0.7816156449856788, 0.7837348199827764, 0.7858597406461707,
    0.7879904225539431, 0.7901268813264122, 0.7922691326262467, 0.7944171921585818,
    0.7965710756711334, 0.7987307989543135, 0.8008963778413465, 0.8030678282083853,
    0.805245165974627, 0.8074284071024302, 0.8096175675974316, 0.8118126635086642,
    0.8140137109286738, 0.8162207259936375, 0.8184337248834821, 0.820652723822003,
    0.8228777390769823, 0.8251087869603088, 0.8273458838280969, 0.8295890460808079,
    0.8318382901633681, 0.8340936325652911, 0.8363550898207981, 0.8386226785089391,
    0.8408964152537144, 0.8431763167241966, 0.8454623996346523, 0.8477546807446661,
    0.8500531768592616, 0.8523579048290255, 0.8546688815502312, 0.8569861239649629,
    0.8593096490612387, 0.8616394738731368, 0.8639756154809185, 0.8663180910111553,
    0.8686669176368529, 0.871022112577578, 0.8733836930995842, 0.8757516765159389,
    0.8781260801866495, 0.8805069215187917, 0.8828942179666361, 0.8852879870317771,
    0.8876882462632604, 0.890095013257712, 0.8925083056594671, 0.8949281411607002,
    0.8973545375015533, 0.8997875124702672, 0.9022270839033115, 0.9046732696855155,
    0.9071260877501991, 0.909585556079304, 0.9120516927035263, 0.9145245157024483,
    0.9170040432046711, 0.9194902933879467, 0.9219832844793128, 0.9244830347552253,
    0.9269895625416926, 0.92950288621441, 0.9320230241988943, 0.9345499949706191,
    0.9370838170551498, 0.93962450902828, 0.9421720895161669, 0.9447265771954693,
    0.9472879907934827, 0.9498563490882775, 0.9524316709088368, 0.9550139751351947,
    0.9576032806985735, 0.9601996065815236, 0.9628029718180622, 0.9654133954938133,
    0.9680308967461471, 0.9706554947643201, 0.9732872087896164, 0.9759260581154889,
    0.9785720620876999, 0.9812252401044634, 0.9838856116165875, 0.9865531961276168,
    0.9892280131939752, 0.9919100824251095, 0.9945994234836328, 0.9972960560854698,
];

/// The low 52 bits (the fraction) of an `f64`.
const FRACTION_MASK: u64 = (1 << 52) - 1;

/// [`SCHEMA_8_BOUNDS`]' fractions: every bound lies in `[0.5, 1)` and so has the same
/// exponent, and comparing the fractions compares the bounds.
const SCHEMA_8_FRACTIONS: [u64; 256] = {
    let mut fractions = [0; 256];
    let mut k = 0;
    while k < 256 {
        fractions[k] = SCHEMA_8_BOUNDS[k].to_bits() & FRACTION_MASK;
        k += 1;
    }
    fractions
};

/// `v` (positive, finite) as `(fraction, exponent)` with `v = (1 + fraction/2^52) · 2^exponent`,
/// subnormals normalized.
fn split(v: f64) -> (u64, i32) {
    let bits = v.to_bits();
    let biased = i32::try_from((bits >> 52) & 0x7ff).unwrap_or(0);
    let fraction = bits & FRACTION_MASK;
    if biased != 0 {
        return (fraction, biased - 1023);
    }
    // A subnormal: its highest set bit becomes the implicit 1.
    let top = 63 - i32::try_from(fraction.leading_zeros()).unwrap_or(63);
    ((fraction << (52 - top)) & FRACTION_MASK, top - 1074)
}

/// The native bucket index of `v` (positive, not NaN) at `schema`: bucket `i` holds the values
/// in `(2^((i-1)/2^schema), 2^(i/2^schema)]` (the bounds of positive schemas from
/// [`SCHEMA_8_BOUNDS`]); `+Inf` goes to the bucket after `f64::MAX`'s. The library's
/// `bucket_index` (its `frexp` fraction `f = (1 + fraction/2^52)/2` and exponent `e = exponent
/// + 1`), in integer arithmetic: the sub-bucket is the number of bounds below the fraction.
fn bucket_index(schema: i8, v: f64) -> i32 {
    debug_assert!(
        v > 0.0,
        "zero and negative values are handled by the caller"
    );
    let infinite = v.is_infinite();
    let (fraction, exponent) = split(if infinite { f64::MAX } else { v });
    let index = if schema > 0 {
        // The number of the schema's bounds (every `stride`-th of schema 8's) strictly below
        // the value's fraction, by bisection.
        let stride = 8 - u32::from(schema.unsigned_abs());
        let (mut below, mut above) = (0_usize, 1_usize << schema);
        while below < above {
            let mid = (below + above) / 2;
            if SCHEMA_8_FRACTIONS[mid << stride] < fraction {
                below = mid + 1;
            } else {
                above = mid;
            }
        }
        // `below` ≤ 256, `exponent` within ±1100: no overflow.
        i32::try_from(below).unwrap_or(256) + exponent * (1 << schema)
    } else {
        // A power of two (fraction 0) is the upper bound of its bucket.
        let key = exponent + 1 - i32::from(fraction == 0);
        let shift = u32::from(schema.unsigned_abs());
        (key + (1 << shift) - 1) >> shift
    };
    if infinite {
        index.saturating_add(1)
    } else {
        index
    }
}

/// One histogram series: classic buckets, optional native buckets and the series' exemplars,
/// under one lock. Built by [`ProbeHistogram::new`]; see the module documentation for how it
/// counts.
#[derive(Debug)]
pub struct ProbeHistogram {
    state: Mutex<State>,
    /// The classic bounds, finite, without `+Inf` (shared by the family's series: each series
    /// keeps only its counts).
    classic_bounds: Arc<[f64]>,
    /// The family's classic bounds (without `+Inf`), also when only native buckets are
    /// exported: the exemplars' slots.
    exemplar_slots: Arc<[f64]>,
}

/// Everything [`ProbeHistogram::read`] shows, changed together.
#[derive(Debug)]
struct State {
    sum: f64,
    count: u64,
    /// The count in each classic bucket only (not cumulative), one per bound of
    /// [`ProbeHistogram::classic_bounds`] and `+Inf` last; never empty.
    classic: Box<[u64]>,
    native: Option<Native>,
    /// `(slot, exemplar)`, at most one per slot, in the order the slots were first filled.
    exemplars: Vec<(u16, Exemplar)>,
}

/// The native buckets of a series.
#[derive(Debug)]
struct Native {
    schema: i8,
    /// [`ZERO_THRESHOLD`]; negative for a zero bucket of zero width (the library's
    /// `NATIVE_HISTOGRAM_ZERO_THRESHOLD_ZERO`, reachable only in tests).
    zero_threshold: f64,
    zero_count: u64,
    /// `(bucket index, count)`, sorted by index, counts > 0.
    positive: Vec<(i32, u64)>,
    negative: Vec<(i32, u64)>,
    created: SystemTime,
}

impl Native {
    fn observe(&mut self, v: f64) {
        let in_zero_bucket = if self.zero_threshold < 0.0 {
            v == 0.0
        } else {
            v.abs() <= self.zero_threshold
        };
        if in_zero_bucket {
            self.zero_count += 1;
            return;
        }
        let index = bucket_index(self.schema, v.abs());
        let side = if v.is_sign_negative() {
            &mut self.negative
        } else {
            &mut self.positive
        };
        match side.binary_search_by_key(&index, |(i, _)| *i) {
            Ok(at) => side[at].1 += 1,
            Err(at) => side.insert(at, (index, 1)),
        }
    }
}

/// A consistent view of one series, taken under its lock ([`ProbeHistogram::read`]).
#[derive(Debug)]
pub struct HistogramView<'a> {
    /// The sum of all observations (NaN once a NaN was observed, as the library).
    pub sum: f64,
    /// The number of observations, NaN included.
    pub count: u64,
    /// `(upper bound, count in that bucket only — not cumulative)`, the `+Inf` bucket last:
    /// exactly the library's classic buckets. Never empty: with no classic bounds configured
    /// (native only) it is the lone `+Inf` bucket, which counts every observation.
    pub classic: ClassicBuckets<'a>,
    /// The native buckets, if enabled.
    pub native: Option<NativeView<'a>>,
    /// `(slot, exemplar)`, at most one per slot: the slot is the index of the first exemplar
    /// slot bound (the family's classic bounds) at or above the exemplar's value, the number
    /// of bounds for values above all of them. In the order the slots were first filled; see
    /// [`ProbeHistogram::exemplars`] for oldest first.
    pub exemplars: &'a [(u16, Exemplar)],
}

/// The classic buckets of a [`HistogramView`]: the family's bounds and the series' counts.
#[derive(Debug, Clone, Copy)]
pub struct ClassicBuckets<'a> {
    bounds: &'a [f64],
    counts: &'a [u64],
}

impl<'a> ClassicBuckets<'a> {
    /// How many buckets, `+Inf` included (at least 1).
    pub fn len(&self) -> usize {
        self.counts.len()
    }

    /// Never: there is always the `+Inf` bucket.
    pub fn is_empty(&self) -> bool {
        self.counts.is_empty()
    }

    /// `(upper bound, count in that bucket only)`, in order, `+Inf` last.
    pub fn iter(&self) -> impl Iterator<Item = (f64, u64)> + 'a {
        let (bounds, counts) = (self.bounds, self.counts);
        (bounds.iter().copied().chain(once(f64::INFINITY))).zip(counts.iter().copied())
    }

    /// The pairs as a vector, for prometheus-client's encoder (which takes a slice).
    fn to_vec(self) -> Vec<(f64, u64)> {
        self.iter().collect()
    }
}

/// The native buckets of a [`HistogramView`].
#[derive(Debug, Clone, Copy)]
pub struct NativeView<'a> {
    /// The schema, −4 to 8: bucket `i` holds `(2^((i-1)/2^schema), 2^(i/2^schema)]`.
    pub schema: i8,
    /// The zero bucket's threshold as exported: [`ZERO_THRESHOLD`] (the library exports 0.0
    /// for a zero bucket of zero width, which our configurations never have).
    pub zero_threshold: f64,
    /// Observations with `|v|` at or below the threshold.
    pub zero_count: u64,
    /// `(bucket index, count)` of the positive values, sorted by index, counts > 0.
    pub positive: &'a [(i32, u64)],
    /// The same for the negative values (by `|v|`).
    pub negative: &'a [(i32, u64)],
    /// When the series was made: the protobuf exposition's `start_timestamp`.
    pub created: SystemTime,
}

impl NativeView<'_> {
    /// The positive buckets as Prometheus' protobuf wants them, written into `spans`
    /// (`(offset, length)`: the first offset from index 0, later ones from the end of the
    /// span before) and `deltas` (each bucket's count minus the one before, the first from
    /// 0), both cleared first. Gaps of one or two empty buckets are filled with zero counts
    /// inside a span, longer gaps start a new one (the library's `encode_spans_and_deltas`).
    ///
    /// The library's empty-histogram rule: with an exported zero threshold of 0.0, no
    /// zero-bucket count and no bucket on either side, `spans` is `[(0, 0)]`, so that
    /// Prometheus tells the message from a classic histogram (never with [`ZERO_THRESHOLD`]).
    ///
    /// Errors: a count above `i64::MAX` (the library fails the encode likewise); the buffers
    /// then hold a partial encoding.
    pub fn positive_spans_and_deltas(
        &self,
        spans: &mut Vec<(i32, u32)>,
        deltas: &mut Vec<i64>,
    ) -> Result<(), std::fmt::Error> {
        spans_and_deltas(self.positive, spans, deltas)?;
        if self.zero_threshold == 0.0
            && self.zero_count == 0
            && self.positive.is_empty()
            && self.negative.is_empty()
        {
            spans.push((0, 0));
        }
        Ok(())
    }

    /// The negative buckets likewise ([`NativeView::positive_spans_and_deltas`]; the
    /// empty-histogram span is on the positive side only). Errors: a count above `i64::MAX`.
    pub fn negative_spans_and_deltas(
        &self,
        spans: &mut Vec<(i32, u32)>,
        deltas: &mut Vec<i64>,
    ) -> Result<(), std::fmt::Error> {
        spans_and_deltas(self.negative, spans, deltas)
    }
}

/// `buckets` (sorted by index, counts > 0) as spans and deltas into the cleared buffers.
fn spans_and_deltas(
    buckets: &[(i32, u64)],
    spans: &mut Vec<(i32, u32)>,
    deltas: &mut Vec<i64>,
) -> Result<(), std::fmt::Error> {
    spans.clear();
    deltas.clear();
    let mut previous = 0_i64;
    let mut next_index = 0_i32;
    for (n, &(index, count)) in buckets.iter().enumerate() {
        let count = i64::try_from(count).map_err(|_| std::fmt::Error)?;
        let gap = index - next_index;
        let mut filled = 1;
        if n == 0 || gap > 2 {
            spans.push((gap, 0));
        } else {
            for _ in 0..gap {
                deltas.push(-previous);
                previous = 0;
            }
            filled += gap.unsigned_abs();
        }
        deltas.push(count - previous);
        previous = count;
        if let Some((_, length)) = spans.last_mut() {
            *length += filled;
        }
        next_index = index + 1;
    }
    Ok(())
}

impl ProbeHistogram {
    /// A series with the classic bucket bounds `classic` (without `+Inf`, which is implicit;
    /// non-finite bounds are dropped; empty for the lone `+Inf` bucket of native-only mode),
    /// native buckets at `native_schema` if `Some` (clamped to −4..=8; see
    /// [`ProbeHistogram::schema_for_factor`]) and one exemplar slot per bound of
    /// `exemplar_slots` plus one above them (the family's classic bounds, also when only
    /// native buckets are exported). The same as prometheus-client's
    /// `Histogram::new(classic)` without a native schema, and
    /// `Histogram::new_classic_and_native(classic, NativeHistogramConfig::new(factor))` with
    /// the factor's schema.
    pub fn new(classic: Arc<[f64]>, native_schema: Option<i8>, exemplar_slots: Arc<[f64]>) -> Self {
        // The family's bounds are shared as they are (they are finite: `with_thresholds`);
        // only other bounds are copied without their non-finite ones.
        let classic_bounds = if classic.iter().all(|b| b.is_finite()) {
            classic
        } else {
            classic.iter().copied().filter(|b| b.is_finite()).collect()
        };
        let classic = vec![0; classic_bounds.len() + 1].into_boxed_slice();
        let native = native_schema.map(|schema| Native {
            schema: schema.clamp(SCHEMA_MIN, SCHEMA_MAX),
            zero_threshold: ZERO_THRESHOLD,
            zero_count: 0,
            positive: Vec::new(),
            negative: Vec::new(),
            created: SystemTime::now(),
        });
        ProbeHistogram {
            state: Mutex::new(State {
                sum: 0.0,
                count: 0,
                classic,
                native,
                exemplars: Vec::new(),
            }),
            classic_bounds,
            exemplar_slots,
        }
    }

    /// The native schema for a bucket growth factor: the finest whose buckets grow by at most
    /// `factor` (`floor(log2(log2(factor)))` negated, within −4..=8: 1.1 → 3, 2 → 0, 65536 →
    /// −4), the rule of prometheus-client's `NativeHistogramConfig::new(factor)`. For a
    /// factor at or below 1 or NaN, where the library panics, 8 (the finest).
    pub fn schema_for_factor(factor: f64) -> i8 {
        let floor = factor.log2().log2().floor();
        if floor.is_nan() || floor <= -f64::from(SCHEMA_MAX) {
            SCHEMA_MAX
        } else if floor >= -f64::from(SCHEMA_MIN) {
            SCHEMA_MIN
        } else {
            // An integer strictly between −4 and 8 here.
            (SCHEMA_MIN..=SCHEMA_MAX)
                .find(|s| f64::from(*s) == -floor)
                .unwrap_or(SCHEMA_MAX)
        }
    }

    /// Heap bytes this series holds beyond its own struct, as `(native buckets, classic
    /// buckets and exemplars)`: the capacities of its vectors and its exemplars' request ids.
    /// For the scale benchmark's memory accounting (BENCHMARKS §17).
    #[doc(hidden)]
    pub fn heap_bytes(&self) -> (usize, usize) {
        let s = self.lock();
        let native = s.native.as_ref().map_or(0, |n| {
            (n.positive.capacity() + n.negative.capacity()) * std::mem::size_of::<(i32, u64)>()
        });
        let exemplars = s.exemplars.capacity() * std::mem::size_of::<(u16, Exemplar)>()
            + (s.exemplars.iter())
                .map(|(_, e)| e.request_id.as_ref().map_or(0, |r| r.len()))
                .sum::<usize>();
        let classic = s.classic.len() * std::mem::size_of::<u64>();
        (native, classic + exemplars)
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        // Nothing panics while the lock is held; a poisoned lock still holds whole counts.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Observes `v` (any `f64`: NaN, infinities, negatives and zeros count as in the
    /// library). With `exemplar` (and `v` not NaN), it replaces the one kept for `v`'s
    /// exemplar slot. Allocates only to add a native bucket or fill a slot the first time.
    pub fn observe(&self, v: f64, exemplar: Option<Exemplar>) {
        let mut state = self.lock();
        state.sum += v;
        state.count += 1;
        // The first bucket at or above `v`; NaN (which compares with nothing) in `+Inf`.
        let bucket = (self.classic_bounds.iter())
            .position(|bound| *bound >= v)
            .unwrap_or(self.classic_bounds.len());
        state.classic[bucket] += 1;
        if !v.is_nan() {
            if let Some(native) = state.native.as_mut() {
                native.observe(v);
            }
        }
        let Some(e) = exemplar.filter(|_| !v.is_nan()) else {
            return;
        };
        let slot = self
            .exemplar_slots
            .iter()
            .position(|b| v <= *b)
            .unwrap_or(self.exemplar_slots.len());
        let slot = u16::try_from(slot).unwrap_or(u16::MAX);
        match state.exemplars.iter_mut().find(|(s, _)| *s == slot) {
            Some((_, old)) => *old = e,
            None => state.exemplars.push((slot, e)),
        }
    }

    /// The exemplar slots' bounds (the family's classic bounds, without `+Inf`): slot `i` of
    /// [`HistogramView::exemplars`] is `(bounds[i-1], bounds[i]]`, slot `bounds.len()` above
    /// them all.
    pub fn exemplar_slots(&self) -> &[f64] {
        &self.exemplar_slots
    }

    /// The exemplars kept, oldest first (by the probe's start).
    pub fn exemplars(&self) -> Vec<Exemplar> {
        let mut all: Vec<Exemplar> = self
            .lock()
            .exemplars
            .iter()
            .map(|(_, e)| e.clone())
            .collect();
        all.sort_by_key(|e| e.at_unix_ns);
        all
    }

    /// Runs `f` on a consistent view of the series, under its lock (keep `f` short: it
    /// blocks observations of this series). Allocates nothing.
    pub fn read<R>(&self, f: impl FnOnce(&HistogramView<'_>) -> R) -> R {
        let state = self.lock();
        let view = HistogramView {
            sum: state.sum,
            count: state.count,
            classic: ClassicBuckets {
                bounds: &self.classic_bounds,
                counts: &state.classic,
            },
            native: state.native.as_ref().map(|n| NativeView {
                schema: n.schema,
                zero_threshold: n.zero_threshold.max(0.0),
                zero_count: n.zero_count,
                positive: &n.positive,
                negative: &n.negative,
                created: n.created,
            }),
            exemplars: &state.exemplars,
        };
        f(&view)
    }

    /// A zero bucket of zero width (only exact zeros in it) instead of [`ZERO_THRESHOLD`]: the
    /// library's `NATIVE_HISTOGRAM_ZERO_THRESHOLD_ZERO`, for tests of subnormal values and the
    /// empty-histogram span.
    #[cfg(test)]
    fn with_zero_width_zero_bucket(self) -> Self {
        if let Some(native) = self.lock().native.as_mut() {
            native.zero_threshold = -1.0;
        }
        self
    }
}

impl TypedMetric for ProbeHistogram {
    const TYPE: MetricType = MetricType::Histogram;
}

/// Encodes as prometheus-client's `Histogram` does, through the same encoder calls, so a
/// `Registry` holding a `ProbeHistogram` encodes byte for byte as one holding the library's
/// `Histogram` of the same layout and observations (the reference for the fast encoder).
impl EncodeMetric for ProbeHistogram {
    fn encode(&self, mut encoder: MetricEncoder) -> Result<(), std::fmt::Error> {
        let no_exemplars = None::<&HashMap<usize, LibraryExemplar<NoLabelSet, f64>>>;
        let (mut positive_spans, mut positive_deltas) = (Vec::new(), Vec::new());
        let (mut negative_spans, mut negative_deltas) = (Vec::new(), Vec::new());
        self.read(|h| {
            let Some(native) = &h.native else {
                return encoder.encode_histogram(h.sum, h.count, &h.classic.to_vec(), no_exemplars);
            };
            native.negative_spans_and_deltas(&mut negative_spans, &mut negative_deltas)?;
            native.positive_spans_and_deltas(&mut positive_spans, &mut positive_deltas)?;
            encoder.encode_histogram_with_native(
                h.sum,
                h.count,
                &h.classic.to_vec(),
                no_exemplars,
                NativeHistogram {
                    schema: i32::from(native.schema),
                    zero_threshold: native.zero_threshold,
                    zero_count: native.zero_count,
                    negative: NativeHistogramBuckets {
                        spans: &negative_spans,
                        deltas: &negative_deltas,
                    },
                    positive: NativeHistogramBuckets {
                        spans: &positive_spans,
                        deltas: &positive_deltas,
                    },
                    created: Some(native.created),
                },
            )
        })
    }

    fn metric_type(&self) -> MetricType {
        Self::TYPE
    }
}

/// A [`ProbeHistogram`] shared by its family and every caller that observes it (cloning
/// shares the series, like prometheus-client's metric handles). Encodes as the histogram.
#[derive(Debug, Clone)]
pub struct SharedHistogram(Arc<ProbeHistogram>);

impl SharedHistogram {
    /// Shares `histogram`.
    pub fn new(histogram: ProbeHistogram) -> Self {
        SharedHistogram(Arc::new(histogram))
    }
}

impl std::ops::Deref for SharedHistogram {
    type Target = ProbeHistogram;

    fn deref(&self) -> &ProbeHistogram {
        &self.0
    }
}

impl TypedMetric for SharedHistogram {
    const TYPE: MetricType = MetricType::Histogram;
}

impl EncodeMetric for SharedHistogram {
    fn encode(&self, encoder: MetricEncoder) -> Result<(), std::fmt::Error> {
        self.0.encode(encoder)
    }

    fn metric_type(&self) -> MetricType {
        MetricType::Histogram
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::measure::TraceId;
    use prometheus_client::encoding::prometheus_protobuf::prometheus_data_model as pb;
    use prometheus_client::encoding::{prometheus_protobuf, prometheus_text, text};
    use prometheus_client::metrics::histogram::{
        Histogram, NativeHistogramConfig, NATIVE_HISTOGRAM_ZERO_THRESHOLD_ZERO,
    };
    use prometheus_client::registry::{Metric, Registry};
    use proptest::prelude::*;
    use std::time::Duration;

    /// One layout for both sides: classic bounds, the native bucket factor (if any) and
    /// whether the zero bucket has zero width (native only).
    #[derive(Debug, Clone)]
    struct Layout {
        classic: Vec<f64>,
        factor: Option<f64>,
        zero_width: bool,
    }

    impl Layout {
        fn library(&self) -> Histogram {
            let classic = self.classic.iter().copied();
            match self.factor {
                None => Histogram::new(classic),
                Some(factor) => {
                    let mut config = NativeHistogramConfig::new(factor);
                    if self.zero_width {
                        config = config.zero_threshold(NATIVE_HISTOGRAM_ZERO_THRESHOLD_ZERO);
                    }
                    Histogram::new_classic_and_native(classic, config)
                }
            }
        }

        fn ours(&self) -> ProbeHistogram {
            let classic: Arc<[f64]> = self.classic.clone().into();
            let h = ProbeHistogram::new(
                classic.clone(),
                self.factor.map(ProbeHistogram::schema_for_factor),
                classic,
            );
            if self.zero_width {
                h.with_zero_width_zero_bucket()
            } else {
                h
            }
        }
    }

    type Expositions = (Result<(Vec<u8>, usize), ()>, String, String);

    /// The three expositions of a registry holding `metric` alone: the Prometheus protobuf
    /// messages (length-delimited, with the native `start_timestamp` taken out, and whether
    /// there was one), OpenMetrics text and Prometheus text (each with its result: the text
    /// encoders refuse some histograms).
    fn expositions(metric: impl Metric) -> Expositions {
        let mut registry = Registry::default();
        registry.register("probe_latency_seconds", "A latency.", metric);
        let protobuf = prometheus_protobuf::encode(&registry)
            .map(|mut families| {
                let mut bytes = Vec::new();
                let mut stamped = 0;
                for family in &mut families {
                    for m in &mut family.metric {
                        if let Some(h) = m.histogram.as_mut() {
                            stamped += usize::from(h.start_timestamp.take().is_some());
                        }
                    }
                    prost::Message::encode_length_delimited(&*family, &mut bytes).unwrap();
                }
                (bytes, stamped)
            })
            .map_err(|_| ());
        let mut openmetrics = String::new();
        let r = text::encode(&mut openmetrics, &registry);
        openmetrics.push_str(&format!("\n-> {r:?}"));
        let mut prometheus = String::new();
        let r = prometheus_text::encode(&mut prometheus, &registry);
        prometheus.push_str(&format!("\n-> {r:?}"));
        (protobuf, openmetrics, prometheus)
    }

    /// Observes `values` in both (ours without exemplars) and asserts equal expositions.
    fn assert_same(layout: &Layout, values: &[f64]) -> Result<(), TestCaseError> {
        let (library, ours) = (layout.library(), layout.ours());
        for &v in values {
            library.observe(v);
            ours.observe(v, None);
        }
        let (lp, lo, lt) = expositions(library);
        let (op, oo, ot) = expositions(ours);
        prop_assert_eq!(lp, op, "protobuf, {:?}, {:?}", layout, values);
        prop_assert_eq!(lo, oo, "OpenMetrics text, {:?}, {:?}", layout, values);
        prop_assert_eq!(lt, ot, "Prometheus text, {:?}, {:?}", layout, values);
        Ok(())
    }

    fn next_up(v: f64) -> f64 {
        v.next_up()
    }

    fn next_down(v: f64) -> f64 {
        v.next_down()
    }

    /// A native bound of schema 8: the `k`-th (2^(k/256)), as the library's table has it.
    fn schema_8_bound(k: i32) -> f64 {
        let (octave, sub) = (k.div_euclid(256), k.rem_euclid(256));
        SCHEMA_8_BOUNDS[usize::try_from(sub).unwrap()] * 2f64.powi(octave + 1)
    }

    /// The values a case observes: `(kind, x, pick, nudge)` read against the layout.
    fn value(layout: &Layout, (kind, x, pick, nudge): (u8, f64, usize, i8)) -> f64 {
        let nudged = |v: f64| match nudge {
            -1 => next_down(v),
            1 => next_up(v),
            _ => v,
        };
        const SPECIAL: [f64; 13] = [
            0.0,
            -0.0,
            f64::NAN,
            f64::INFINITY,
            f64::NEG_INFINITY,
            ZERO_THRESHOLD,
            -ZERO_THRESHOLD,
            f64::MIN_POSITIVE,
            5e-324,
            f64::MAX,
            -f64::MAX,
            1.0,
            -1.0,
        ];
        match kind {
            0 => nudged(SPECIAL[pick % SPECIAL.len()]),
            // Log-uniform over 1e-40..1e6, either sign.
            1 | 2 => {
                let v = 10f64.powf(-40.0 + 46.0 * x);
                if kind == 2 {
                    -v
                } else {
                    v
                }
            }
            // A classic bound, exactly or one ULP off.
            3 if !layout.classic.is_empty() => nudged(layout.classic[pick % layout.classic.len()]),
            // A native bound of any schema (every schema's bounds are schema 8's), within
            // 2^-40..2^20, exactly or one ULP off.
            _ => nudged(schema_8_bound(i32::try_from(pick % 15360).unwrap() - 10240)),
        }
    }

    fn layouts() -> impl Strategy<Value = Layout> {
        let factor = prop_oneof![
            Just(1.1),
            Just(2.0),
            Just(4.0),
            Just(1.0001),
            Just(65536.0),
            // Log-uniform over 1.0001..65536.
            (0.0f64..1.0).prop_map(|t| {
                let (lo, hi) = (1.0001f64.ln(), 65536f64.ln());
                (lo + t * (hi - lo)).exp()
            }),
        ];
        (
            proptest::collection::vec(-6.0f64..4.0, 0..=25),
            proptest::option::of(factor),
            any::<bool>(),
        )
            .prop_map(|(exponents, factor, zero_width)| {
                // As the exporter's layouts: finite, > 0, sorted, deduplicated.
                let mut classic: Vec<f64> = exponents.iter().map(|e| 10f64.powf(*e)).collect();
                classic.sort_by(f64::total_cmp);
                classic.dedup();
                Layout {
                    classic,
                    factor,
                    zero_width: zero_width && factor.is_some(),
                }
            })
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(300))]

        /// Random layouts and observations encode byte for byte as the library's histogram in
        /// all three expositions (but for the native start timestamp).
        #[test]
        fn encodes_as_the_library_histogram(
            layout in layouts(),
            raw in proptest::collection::vec(
                (0u8..6, 0.0f64..1.0, any::<usize>(), -1i8..=1),
                0..120,
            ),
        ) {
            let values: Vec<f64> = raw.into_iter().map(|r| value(&layout, r)).collect();
            assert_same(&layout, &values)?;
        }
    }

    #[test]
    fn empty_and_nan_only_histograms_encode_as_the_library() {
        for factor in [None, Some(1.1)] {
            for zero_width in [false, true] {
                for classic in [vec![], vec![0.1, 1.0]] {
                    let layout = Layout {
                        classic,
                        factor,
                        zero_width: zero_width && factor.is_some(),
                    };
                    assert_same(&layout, &[]).unwrap();
                    assert_same(&layout, &[f64::NAN]).unwrap();
                    assert_same(&layout, &[f64::NAN, 0.0, -0.0]).unwrap();
                }
            }
        }
        // The empty-histogram span is there with a zero-width zero bucket only.
        let layout = Layout {
            classic: vec![],
            factor: Some(2.0),
            zero_width: true,
        };
        let h = layout.ours();
        h.observe(f64::NAN, None);
        let (mut spans, mut deltas) = (Vec::new(), Vec::new());
        h.read(|v| {
            let n = v.native.unwrap();
            assert_eq!(n.zero_threshold, 0.0);
            n.positive_spans_and_deltas(&mut spans, &mut deltas)
                .unwrap();
        });
        assert_eq!(
            (spans.as_slice(), deltas.as_slice()),
            (&[(0, 0)][..], &[][..])
        );
        let h = Layout {
            zero_width: false,
            ..layout
        }
        .ours();
        h.read(|v| {
            let n = v.native.unwrap();
            assert_eq!(n.zero_threshold, ZERO_THRESHOLD);
            n.positive_spans_and_deltas(&mut spans, &mut deltas)
                .unwrap();
        });
        assert!(spans.is_empty() && deltas.is_empty());
    }

    #[test]
    fn the_zero_threshold_and_schemas_are_the_library_defaults() {
        assert_eq!(
            ZERO_THRESHOLD,
            prometheus_client::metrics::histogram::DEFAULT_NATIVE_HISTOGRAM_ZERO_THRESHOLD
        );
        assert_eq!(ZERO_THRESHOLD, 2f64.powi(-128));
        // The schema the library picks, read from its protobuf exposition, for factors at
        // and one ULP around every schema's own growth factor 2^(2^-schema), and a few more.
        let mut factors = vec![1.0001, 1.1, 1.5, 2.0, 3.0, 4.0, 1000.0, 65536.0, 1e9];
        for schema in SCHEMA_MIN..=SCHEMA_MAX {
            let f = 2f64.powf(2f64.powi(-i32::from(schema)));
            factors.extend([next_down(f), f, next_up(f)]);
        }
        for factor in factors {
            if factor <= 1.0 {
                continue;
            }
            let library = Histogram::new_native(NativeHistogramConfig::new(factor));
            let (bytes, _) = expositions(library).0.unwrap();
            let family: pb::MetricFamily =
                prost::Message::decode_length_delimited(bytes.as_slice()).unwrap();
            let schema = family.metric[0].histogram.as_ref().unwrap().schema;
            assert_eq!(
                i32::from(ProbeHistogram::schema_for_factor(factor)),
                schema,
                "factor {factor:e}"
            );
        }
        assert_eq!(ProbeHistogram::schema_for_factor(1.1), 3);
        assert_eq!(ProbeHistogram::schema_for_factor(f64::NAN), SCHEMA_MAX);
        assert_eq!(ProbeHistogram::schema_for_factor(0.5), SCHEMA_MAX);
    }

    /// Every bucket bound of every schema within 2^-20..2^20, and the values one ULP either
    /// side of it, in the bucket the library puts them in (and the one the bound's definition
    /// says); and the extremes (subnormals, `f64::MAX`, `±Inf`) with a zero bucket of zero
    /// width.
    #[test]
    fn every_native_bound_lands_where_the_library_puts_it() {
        for schema in SCHEMA_MIN..=SCHEMA_MAX {
            // (value, its index by definition)
            let mut cases: Vec<(f64, i32)> = Vec::new();
            if schema > 0 {
                let n = 1 << schema;
                let stride = 1 << (8 - schema);
                for i in -20 * n..=20 * n {
                    let b = schema_8_bound(i * stride);
                    cases.extend([(next_down(b), i), (b, i), (next_up(b), i + 1)]);
                }
            } else {
                let width = 1 << -schema;
                for e in -20..=20 {
                    let b = 2f64.powi(e);
                    // 2^e is in bucket ceil(e / width), just above it in floor(e / width) + 1.
                    let at = -((-e).div_euclid(width));
                    cases.extend([
                        (next_down(b), at),
                        (b, at),
                        (next_up(b), e.div_euclid(width) + 1),
                    ]);
                }
            }
            for &(v, index) in &cases {
                assert_eq!(bucket_index(schema, v), index, "schema {schema}, {v:e}");
            }
            // The library's buckets for the same values, with a sign each way and ours
            // compared through the full exposition (a factor between the schema's growth
            // and the next coarser one's picks the schema).
            let layout = Layout {
                classic: vec![],
                factor: Some(2f64.powf(1.5 * 2f64.powi(-i32::from(schema)))),
                zero_width: false,
            };
            assert_eq!(
                ProbeHistogram::schema_for_factor(layout.factor.unwrap()),
                schema
            );
            let values: Vec<f64> = cases.iter().flat_map(|(v, _)| [*v, -*v]).collect();
            assert_same(&layout, &values).unwrap();

            let extremes = Layout {
                zero_width: true,
                ..layout
            };
            let mut values = vec![5e-324, 1e-320, 3e-310, next_down(f64::MIN_POSITIVE)];
            values.extend([f64::MIN_POSITIVE, 1e-300, f64::MAX, next_down(f64::MAX)]);
            values.extend([f64::INFINITY, 0.0, -0.0]);
            for k in 0..52 {
                values.push(f64::from_bits(1 << k));
                values.push(f64::from_bits((1 << k) | 1));
            }
            let both: Vec<f64> = values.iter().flat_map(|v| [*v, -*v]).collect();
            assert_same(&extremes, &both).unwrap();
        }
    }

    #[test]
    fn reads_are_consistent_while_another_thread_observes() {
        let bounds: Arc<[f64]> = Arc::from(crate::metrics::TTFT_BUCKETS);
        let h = Arc::new(ProbeHistogram::new(bounds.clone(), Some(3), bounds));
        let observer = {
            let h = h.clone();
            std::thread::spawn(move || {
                let mut x = 0x9e37_79b9_7f4a_7c15_u64;
                for _ in 0..200_000 {
                    x ^= x << 13;
                    x ^= x >> 7;
                    x ^= x << 17;
                    // Spread over 1e-3..1e2 and zero, no NaN.
                    let v = if x.is_multiple_of(50) {
                        0.0
                    } else {
                        10f64.powf(-3.0 + 5.0 * (x >> 11) as f64 / (1u64 << 53) as f64)
                    };
                    h.observe(v, None);
                }
            })
        };
        let (mut views, mut last) = (0, 0);
        while !observer.is_finished() || views == 0 {
            h.read(|v| {
                let classic: u64 = v.classic.iter().map(|(_, c)| c).sum();
                assert_eq!(classic, v.count, "+Inf cumulative = count");
                let n = v.native.unwrap();
                let native = n.zero_count
                    + n.positive.iter().map(|(_, c)| c).sum::<u64>()
                    + n.negative.iter().map(|(_, c)| c).sum::<u64>();
                assert_eq!(native, v.count, "native buckets = count");
                assert!(v.count >= last);
                last = v.count;
            });
            views += 1;
        }
        observer.join().unwrap();
        assert_eq!(h.read(|v| v.count), 200_000);
        assert!(views > 1, "{views} views");
    }

    /// The buffers behind the view: (pointer, capacity) of each.
    fn buffers(h: &ProbeHistogram) -> Vec<(usize, usize)> {
        let s = h.lock();
        let n = s.native.as_ref().unwrap();
        vec![
            (s.classic.as_ptr() as usize, s.classic.len()),
            (n.positive.as_ptr() as usize, n.positive.capacity()),
            (n.negative.as_ptr() as usize, n.negative.capacity()),
            (s.exemplars.as_ptr() as usize, s.exemplars.capacity()),
        ]
    }

    #[test]
    fn observing_into_existing_buckets_and_slots_does_not_allocate() {
        let bounds: Arc<[f64]> = Arc::from(crate::metrics::TTFT_BUCKETS);
        let h = ProbeHistogram::new(bounds.clone(), Some(3), bounds);
        let values: Vec<f64> = (0..200).map(|i| 0.001 * 1.07f64.powi(i)).collect();
        let e = |v| Exemplar::new(id(1), Some("req"), v, SystemTime::UNIX_EPOCH);
        for &v in &values {
            h.observe(v, Some(e(v)));
            h.observe(-v, None);
        }
        let before = buffers(&h);
        for _ in 0..50 {
            for &v in &values {
                h.observe(v, None);
                h.observe(-v, None);
                h.observe(0.0, None);
                h.observe(f64::NAN, None);
            }
        }
        // Replacing an exemplar moves the caller's allocation in, frees the old one: the
        // slots' buffer stays.
        for &v in &values {
            h.observe(v, Some(e(v)));
        }
        assert_eq!(buffers(&h), before);
        assert_eq!(h.read(|v| v.count), 400 + 50 * 800 + 200);
    }

    fn id(n: u8) -> TraceId {
        TraceId::from_bytes([n; 16]).unwrap()
    }

    #[test]
    fn one_exemplar_per_slot_the_newest_wins_native_only_too() {
        let slots: Arc<[f64]> = Arc::from(&[0.1, 0.5][..]);
        for classic in [slots.clone(), Arc::from(&[][..])] {
            let h = ProbeHistogram::new(classic.clone(), Some(3), slots.clone());
            let at = |ms| SystemTime::UNIX_EPOCH + Duration::from_millis(ms);
            h.observe(0.05, Some(Exemplar::new(id(1), None, 0.05, at(1))));
            h.observe(0.3, Some(Exemplar::new(id(3), None, 0.3, at(3))));
            h.observe(0.07, Some(Exemplar::new(id(2), None, 0.07, at(2))));
            h.observe(9.0, Some(Exemplar::new(id(4), None, 9.0, at(4))));
            h.observe(f64::NAN, Some(Exemplar::new(id(5), None, 9.0, at(5))));
            h.observe(0.2, None);
            assert_eq!(h.exemplar_slots(), &[0.1, 0.5]);
            let kept: Vec<TraceId> = h.exemplars().iter().map(|e| e.trace_id).collect();
            assert_eq!(kept, vec![id(2), id(3), id(4)], "oldest first");
            h.read(|v| {
                let slots: Vec<(u16, TraceId)> =
                    v.exemplars.iter().map(|(s, e)| (*s, e.trace_id)).collect();
                assert_eq!(slots, vec![(0, id(2)), (1, id(3)), (2, id(4))]);
                assert_eq!(v.count, 6);
                assert_eq!(v.classic.len(), classic.len() + 1);
                assert_eq!(
                    v.classic.iter().last().unwrap(),
                    (f64::INFINITY, if classic.is_empty() { 6 } else { 2 })
                );
            });
        }
    }

    #[test]
    fn spans_and_deltas_fill_short_gaps_and_split_long_ones() {
        let (mut spans, mut deltas) = (Vec::new(), Vec::new());
        let buckets = [(-10, 1), (-7, 7), (-5, 7), (2, 8)];
        spans_and_deltas(&buckets, &mut spans, &mut deltas).unwrap();
        assert_eq!(spans, vec![(-10, 6), (6, 1)]);
        assert_eq!(deltas, vec![1, -1, 0, 7, -7, 7, 1]);
        spans_and_deltas(&[(0, 1), (3, 2), (5, 1)], &mut spans, &mut deltas).unwrap();
        assert_eq!(spans, vec![(0, 6)]);
        assert_eq!(deltas, vec![1, -1, 0, 2, -2, 1]);
        spans_and_deltas(&[(3, 1), (7, 2)], &mut spans, &mut deltas).unwrap();
        assert_eq!(spans, vec![(3, 1), (3, 1)]);
        assert_eq!(deltas, vec![1, 1]);
        assert!(spans_and_deltas(&[(0, 1 << 63)], &mut spans, &mut deltas).is_err());
    }

    /// observe() cost, ours against the library's (a release build gives meaningful numbers):
    /// `cargo test --release --lib metrics::histogram::tests::observe_cost -- --ignored --nocapture`.
    #[test]
    #[ignore = "a measurement, not a check"]
    fn observe_cost() {
        let bounds: Arc<[f64]> = Arc::from(crate::metrics::TTFT_BUCKETS);
        let values: Vec<f64> = (0..1024)
            .map(|i| 0.02 * 1.0045f64.powi(i) * if i % 7 == 0 { 3.0 } else { 1.0 })
            .collect();
        let rounds = 2_000;
        for native in [None, Some(3)] {
            let library = match native {
                None => Histogram::new(bounds.iter().copied()),
                Some(_) => Histogram::new_classic_and_native(
                    bounds.iter().copied(),
                    NativeHistogramConfig::new(1.1),
                ),
            };
            let ours = ProbeHistogram::new(bounds.clone(), native, bounds.clone());
            let mut best = [f64::MAX; 2];
            for _ in 0..5 {
                let t = std::time::Instant::now();
                for _ in 0..rounds {
                    for &v in &values {
                        library.observe(std::hint::black_box(v));
                    }
                }
                best[0] = best[0].min(t.elapsed().as_nanos() as f64);
                let t = std::time::Instant::now();
                for _ in 0..rounds {
                    for &v in &values {
                        ours.observe(std::hint::black_box(v), None);
                    }
                }
                best[1] = best[1].min(t.elapsed().as_nanos() as f64);
            }
            let n = (rounds * values.len()) as f64;
            println!(
                "native {native:?}: library {:.1} ns/observe, ours {:.1} ns/observe",
                best[0] / n,
                best[1] / n
            );
        }
    }
}
