//! `calculate_gain`: the recommended scale for a nonlinearity, PyTorch's values exactly.

use super::InitError;

/// PyTorch's `torch.nn.init.calculate_gain(nonlinearity, param)`.
///
/// linear, conv1d/2d/3d, conv_transpose1d/2d/3d and sigmoid: 1; tanh: 5/3; relu: √2;
/// leaky_relu: `√(2 / (1 + slope²))` with `slope = param` (default 0.01); selu: 3/4.
pub fn calculate_gain(nonlinearity: &str, param: Option<f64>) -> Result<f64, InitError> {
    match nonlinearity {
        "linear" | "conv1d" | "conv2d" | "conv3d" | "conv_transpose1d" | "conv_transpose2d"
        | "conv_transpose3d" | "sigmoid" => Ok(1.0),
        "tanh" => Ok(5.0 / 3.0),
        "relu" => Ok(2f64.sqrt()),
        "leaky_relu" => {
            let slope = param.unwrap_or(0.01);
            if !slope.is_finite() {
                return Err(InitError::BadParam(format!(
                    "negative_slope {slope} is not a finite number"
                )));
            }
            Ok((2.0 / (1.0 + slope * slope)).sqrt())
        }
        "selu" => Ok(0.75),
        other => Err(InitError::UnknownNonlinearity(other.to_string())),
    }
}

/// Every nonlinearity [`calculate_gain`] accepts.
pub const NONLINEARITIES: [&str; 12] = [
    "linear",
    "conv1d",
    "conv2d",
    "conv3d",
    "conv_transpose1d",
    "conv_transpose2d",
    "conv_transpose3d",
    "sigmoid",
    "tanh",
    "relu",
    "leaky_relu",
    "selu",
];
