//! What an attention layer is: a kernel (softmax or linear) applied to queries and keys that
//! are each made by a projection (trained, frozen dense orthogonal, frozen Hadamard, the
//! identity, the queries again, or trained from the frozen draw). [`AttentionSpec`] is that
//! product; [`AttentionKind`] names the eight combinations the command line and configurations use. The model is written
//! against the spec, so a new combination needs a name here and nothing in the model.

use super::ModelError;
use serde::{Deserialize, Serialize};

/// How attention mixes the values once queries and keys are made.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kernel {
    /// Causal `softmax(q·kᵀ / sqrt(D)) v`, `O(T²·D)` per head.
    Softmax,
    /// Causal linear attention with the `elu(x)+1` feature map (prefix sums, `O(T·D²)`).
    Linear,
}

/// How a variant produces its queries or its keys.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Projection {
    /// A trainable `C x C` weight in the parameter store.
    Trainable,
    /// A frozen dense random orthogonal `C x C` weight (per head `C x D`, orthonormal columns).
    FrozenDense,
    /// The keys are the queries (the same frozen matrix); no tensor of its own.
    TiedToQ,
    /// The identity: the projection is the input itself; no tensor.
    Identity,
    /// A frozen subsampled randomised Hadamard transform ([`crate::nn::srht::Srht`]).
    Hadamard,
    /// A trainable `C x C` weight whose initial value is the matrix [`Projection::FrozenDense`]
    /// would freeze for the same configuration (same draw, bit for bit), not `N(0, 0.02)`.
    TrainedFromDraw,
}

impl Projection {
    /// Whether the optimiser trains it.
    pub fn trainable(self) -> bool {
        matches!(self, Self::Trainable | Self::TrainedFromDraw)
    }

    /// Whether the model stores a frozen `C x C` tensor for it.
    pub fn stored_frozen(self) -> bool {
        matches!(self, Self::FrozenDense | Self::Hadamard)
    }

    /// Whether it runs as a `C x C` matrix product (trained or frozen dense).
    pub fn dense_product(self) -> bool {
        matches!(
            self,
            Self::Trainable | Self::FrozenDense | Self::TrainedFromDraw
        )
    }

    /// Whether its values, frozen or initial, are the frozen generator's draw (so the draw
    /// method and seed change the model).
    pub fn uses_frozen_draw(self) -> bool {
        matches!(self, Self::FrozenDense | Self::TrainedFromDraw)
    }
}

/// One of the four weights of an attention layer (`out x in`, as PyTorch).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum AttnWeight {
    /// Queries.
    Q,
    /// Keys.
    K,
    /// Values.
    V,
    /// Output projection.
    O,
}

impl AttnWeight {
    /// All four, in store order.
    pub const ALL: [AttnWeight; 4] = [Self::Q, Self::K, Self::V, Self::O];

    /// The two a variant may freeze.
    pub const QK: [AttnWeight; 2] = [Self::Q, Self::K];

    /// Position in [`AttnWeight::ALL`] (Q 0, K 1, V 2, O 3); the frozen weights' seeds are
    /// derived from it, so it never changes.
    pub fn index(self) -> usize {
        self as usize
    }

    /// The name in tensor names (`h.{l}.attn.{name}.weight`).
    pub fn name(self) -> &'static str {
        ["q", "k", "v", "o"][self.index()]
    }
}

/// An attention layer: the kernel and how Q and K are made (V and O are always trained).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AttentionSpec {
    /// The kernel.
    pub kernel: Kernel,
    /// How the queries are made.
    pub q: Projection,
    /// How the keys are made.
    pub k: Projection,
}

impl AttentionSpec {
    /// How weight `w` is made: Q and K by the spec, V and O trained.
    pub fn projection(self, w: AttnWeight) -> Projection {
        match w {
            AttnWeight::Q => self.q,
            AttnWeight::K => self.k,
            AttnWeight::V | AttnWeight::O => Projection::Trainable,
        }
    }

    /// Whether the kernel is linear attention.
    pub fn is_linear(self) -> bool {
        self.kernel == Kernel::Linear
    }

    /// The name of this combination, if it has one.
    pub fn kind(self) -> Option<AttentionKind> {
        AttentionKind::ALL.into_iter().find(|k| k.spec() == self)
    }
}

/// The named attention combinations, as configs and the command line write them.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum AttentionKind {
    /// Standard causal softmax attention with trainable `W_Q, W_K, W_V, W_O`.
    Softmax,
    /// Softmax attention whose per-head `W_Q, W_K` are frozen random orthogonal matrices.
    Orthogonal,
    /// Causal linear attention with the `elu(x)+1` feature map (prefix sums, `O(T·D²)`).
    Linear,
    /// Linear attention with frozen orthogonal `W_Q, W_K`.
    OrthogonalLinear,
    /// Softmax attention with one frozen random orthogonal matrix per head used as both `W_Q`
    /// and `W_K`, so `q·k` is the projected `x·y`.
    OrthogonalTied,
    /// Softmax attention with `W_Q` fixed to the identity (head `h` reads coordinates
    /// `h·D..(h+1)·D` of its input) and a trainable `W_K`.
    IdentityQ,
    /// Softmax attention whose frozen `W_Q, W_K` are subsampled randomised Hadamard transforms
    /// (random signs, a Walsh-Hadamard transform, a fixed random choice of coordinates per
    /// head), applied in `O(C log C)` per token, never as a matrix product.
    OrthogonalHadamard,
    /// Softmax attention with trainable `W_Q, W_K` started at the matrices `orthogonal` would
    /// freeze (same draw, bit for bit): the control that separates freezing from the initial
    /// scale (orthonormal entries have std `1/sqrt(C)`, not 0.02).
    OrthogonalTrained,
}

impl AttentionKind {
    /// All variants, in the order the CLI lists them.
    pub const ALL: [AttentionKind; 8] = [
        Self::Softmax,
        Self::Orthogonal,
        Self::Linear,
        Self::OrthogonalLinear,
        Self::OrthogonalTied,
        Self::IdentityQ,
        Self::OrthogonalHadamard,
        Self::OrthogonalTrained,
    ];

    /// The kernel and projections this name stands for (the one table of what each is).
    pub const fn spec(self) -> AttentionSpec {
        use Kernel::{Linear, Softmax};
        use Projection::{FrozenDense, Hadamard, Identity, TiedToQ, Trainable, TrainedFromDraw};
        let (kernel, q, k) = match self {
            Self::Softmax => (Softmax, Trainable, Trainable),
            Self::Orthogonal => (Softmax, FrozenDense, FrozenDense),
            Self::Linear => (Linear, Trainable, Trainable),
            Self::OrthogonalLinear => (Linear, FrozenDense, FrozenDense),
            Self::OrthogonalTied => (Softmax, FrozenDense, TiedToQ),
            Self::IdentityQ => (Softmax, Identity, Trainable),
            Self::OrthogonalHadamard => (Softmax, Hadamard, Hadamard),
            Self::OrthogonalTrained => (Softmax, TrainedFromDraw, TrainedFromDraw),
        };
        AttentionSpec { kernel, q, k }
    }

    /// How `W_Q` works.
    pub fn q_projection(self) -> Projection {
        self.spec().q
    }

    /// How `W_K` works.
    pub fn k_projection(self) -> Projection {
        self.spec().k
    }

    /// How weight `w` works (V and O are always trained).
    pub fn projection(self, w: AttnWeight) -> Projection {
        self.spec().projection(w)
    }

    /// Whether any of `W_Q, W_K` is not trained (frozen, tied or fixed).
    pub fn frozen_qk(self) -> bool {
        !self.q_projection().trainable() || !self.k_projection().trainable()
    }

    /// Whether `W_Q` or `W_K` is a dense matrix drawn by the configuration's `frozen_method`
    /// (frozen, or trained from the draw): what that option changes.
    pub fn draws_dense(self) -> bool {
        [self.q_projection(), self.k_projection()]
            .iter()
            .any(|p| matches!(p, Projection::FrozenDense | Projection::TrainedFromDraw))
    }

    /// Whether the attention is the linear (kernel) form.
    pub fn is_linear(self) -> bool {
        self.spec().is_linear()
    }

    /// The variant with the same kernel and trained `W_Q, W_K` (softmax or linear): what the
    /// layers a configuration's `frozen_layers` leaves out run.
    pub fn trained_counterpart(self) -> Self {
        if self.is_linear() {
            Self::Linear
        } else {
            Self::Softmax
        }
    }

    /// The name used in configs and on the command line.
    pub fn name(self) -> &'static str {
        match self {
            Self::Softmax => "softmax",
            Self::Orthogonal => "orthogonal",
            Self::Linear => "linear",
            Self::OrthogonalLinear => "orthogonal-linear",
            Self::OrthogonalTied => "orthogonal-tied",
            Self::IdentityQ => "identity-q",
            Self::OrthogonalHadamard => "orthogonal-hadamard",
            Self::OrthogonalTrained => "orthogonal-trained",
        }
    }

    /// Every name, comma-separated (for help and error messages).
    pub fn names() -> String {
        Self::ALL.map(Self::name).join(", ")
    }

    /// Parses a name as written in configs (see [`AttentionKind::names`]).
    pub fn parse(s: &str) -> Result<Self, ModelError> {
        Self::ALL
            .into_iter()
            .find(|k| k.name() == s)
            .ok_or_else(|| {
                ModelError::Config(format!(
                    "unknown attention {s:?}: use one of {}",
                    Self::names()
                ))
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every name is a distinct combination, and the spec maps back to its name.
    #[test]
    fn names_are_distinct_combinations() {
        for kind in AttentionKind::ALL {
            assert_eq!(kind.spec().kind(), Some(kind), "{}", kind.name());
        }
        let unnamed = AttentionSpec {
            kernel: Kernel::Linear,
            q: Projection::Identity,
            k: Projection::Hadamard,
        };
        assert_eq!(unnamed.kind(), None);
    }

    /// V and O are trained in every variant; the indices of Q and K are 0 and 1 (the frozen
    /// seeds depend on them).
    #[test]
    fn values_and_output_are_trained() {
        for kind in AttentionKind::ALL {
            assert!(kind.projection(AttnWeight::V).trainable());
            assert!(kind.projection(AttnWeight::O).trainable());
        }
        assert_eq!(AttnWeight::QK.map(AttnWeight::index), [0, 1]);
        assert_eq!(AttnWeight::ALL.map(AttnWeight::name), ["q", "k", "v", "o"]);
    }
}
