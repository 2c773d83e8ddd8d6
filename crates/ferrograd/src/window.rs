//! The geometry of 2-D windows over NCHW tensors (convolution, pooling, im2col), shared by the
//! ops that check it and the backends that run it.

/// Window geometry: kernel, stride, padding and dilation per spatial axis.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Window {
    pub kernel: (usize, usize),
    pub stride: (usize, usize),
    pub padding: (usize, usize),
    pub dilation: (usize, usize),
    /// Round the output size up (PyTorch's `ceil_mode`): a last window may run past the
    /// padded input (it reads padding there) as long as it starts inside the input or the
    /// leading padding.
    pub ceil: bool,
}

impl Window {
    /// Output spatial size for an input of `h x w`, or None when the window does not fit.
    pub fn output_size(&self, h: usize, w: usize) -> Option<(usize, usize)> {
        Some((
            self.span(
                h,
                self.kernel.0,
                self.stride.0,
                self.padding.0,
                self.dilation.0,
            )?,
            self.span(
                w,
                self.kernel.1,
                self.stride.1,
                self.padding.1,
                self.dilation.1,
            )?,
        ))
    }

    /// Output positions along one axis of `n` (checked: absurd sizes do not fit).
    fn span(&self, n: usize, k: usize, s: usize, p: usize, d: usize) -> Option<usize> {
        if s == 0 || k == 0 || d == 0 {
            return None;
        }
        let eff = d.checked_mul(k - 1)?.checked_add(1)?;
        let padded = n.checked_add(p.checked_mul(2)?)?;
        if padded < eff {
            return None;
        }
        let mut out = if self.ceil {
            (padded - eff).div_ceil(s) + 1
        } else {
            (padded - eff) / s + 1
        };
        if self.ceil && (out - 1).checked_mul(s)? >= n + p {
            out -= 1;
        }
        Some(out)
    }
}

impl std::fmt::Display for Window {
    /// As PyTorch spells the arguments: `kernel_size=(3, 3), stride=(1, 1), ...`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "kernel_size={:?}, stride={:?}, padding={:?}, dilation={:?}",
            self.kernel, self.stride, self.padding, self.dilation
        )?;
        if self.ceil {
            f.write_str(", ceil_mode=True")?;
        }
        Ok(())
    }
}

/// The shape of a convolution: input `[n, c, h, w]`, weight `[o, c / groups, kh, kw]`,
/// output `[n, o, oh, ow]`.
#[derive(Clone, Copy, Debug)]
pub struct ConvShape {
    pub n: usize,
    pub c: usize,
    pub h: usize,
    pub w: usize,
    pub o: usize,
    pub groups: usize,
    pub oh: usize,
    pub ow: usize,
    pub win: Window,
}
